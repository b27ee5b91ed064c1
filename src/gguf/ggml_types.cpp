// Block sizes and byte sizes of every ggml type id, from the block structs in ggml-common.h.
#include "gguf/ggml_types.h"

#include <array>

#include "gguf/gguf.h"
#include "util/error.h"

namespace kvslim::gguf {
namespace detail {
namespace {

constexpr uint32_t kQK = 256;  // elements per "k-quant" super-block (QK_K)

// Indexed by type id; a null name marks an id that is not a valid GGUF tensor type.
constexpr std::array<TypeTraits, 43> kTypes = {{
    {"f32", 1, 4},         // 0
    {"f16", 1, 2},         // 1
    {"q4_0", 32, 18},      // 2
    {"q4_1", 32, 20},      // 3
    {nullptr, 0, 0},       // 4: q4_2, removed
    {nullptr, 0, 0},       // 5: q4_3, removed
    {"q5_0", 32, 22},      // 6
    {"q5_1", 32, 24},      // 7
    {"q8_0", 32, 34},      // 8
    {"q8_1", 32, 36},      // 9
    {"q2_k", kQK, 84},     // 10
    {"q3_k", kQK, 110},    // 11
    {"q4_k", kQK, 144},    // 12
    {"q5_k", kQK, 176},    // 13
    {"q6_k", kQK, 210},    // 14
    {"q8_k", kQK, 292},    // 15
    {"iq2_xxs", kQK, 66},  // 16
    {"iq2_xs", kQK, 74},   // 17
    {"iq3_xxs", kQK, 98},  // 18
    {"iq1_s", kQK, 50},    // 19
    {"iq4_nl", 32, 18},    // 20
    {"iq3_s", kQK, 110},   // 21
    {"iq2_s", kQK, 82},    // 22
    {"iq4_xs", kQK, 136},  // 23
    {"i8", 1, 1},          // 24
    {"i16", 1, 2},         // 25
    {"i32", 1, 4},         // 26
    {"i64", 1, 8},         // 27
    {"f64", 1, 8},         // 28
    {"iq1_m", kQK, 56},    // 29
    {"bf16", 1, 2},        // 30
    {nullptr, 0, 0},       // 31: q4_0_4_4, repacked at load time, never in files
    {nullptr, 0, 0},       // 32: q4_0_4_8, likewise
    {nullptr, 0, 0},       // 33: q4_0_8_8, likewise
    {"tq1_0", kQK, 54},    // 34
    {"tq2_0", kQK, 66},    // 35
    {nullptr, 0, 0},       // 36: iq4_nl_4_4, likewise
    {nullptr, 0, 0},       // 37: iq4_nl_4_8, likewise
    {nullptr, 0, 0},       // 38: iq4_nl_8_8, likewise
    {"mxfp4", 32, 17},     // 39
    {"nvfp4", 64, 36},     // 40
    {"q1_0", 128, 18},     // 41
    {"q2_0", 64, 18},      // 42
}};

}  // namespace

const TypeTraits* find_type_traits(uint32_t type_id) {
  if (type_id >= kTypes.size() || kTypes[type_id].name == nullptr) return nullptr;
  return &kTypes[type_id];
}

}  // namespace detail

const char* tensor_type_name(uint32_t type_id) {
  // Unknown ids get a per-thread buffer so the pointer stays valid after return.
  thread_local char unknown[24];
  if (const auto* traits = detail::find_type_traits(type_id)) return traits->name;
  fmt::format_to_n(unknown, sizeof(unknown) - 1, "unknown({})", type_id).out[0] = '\0';
  return unknown;
}

uint64_t tensor_bytes(uint32_t type_id, uint64_t n_elements) {
  const auto* traits = detail::find_type_traits(type_id);
  if (traits == nullptr) fail("unknown ggml tensor type id {}", type_id);
  if (n_elements % traits->block_size != 0) {
    fail("{} elements of type {} are not a whole number of {}-element blocks", n_elements, traits->name,
         traits->block_size);
  }
  const uint64_t blocks = n_elements / traits->block_size;
  if (blocks > UINT64_MAX / traits->type_size) {
    fail("{} elements of type {} take more than 2^64 bytes", n_elements, traits->name);
  }
  return blocks * traits->type_size;
}

}  // namespace kvslim::gguf
