// DType tables and the portable scalar fp16/bf16 conversions (the bulk ones, per instruction-set
// level, are in convert.cpp).
#include "tensor/dtype.h"

#include <cstring>
#include <string_view>

#include "tensor/kernels.h"
#include "util/error.h"

namespace kvslim {
namespace {

inline uint32_t f2u(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float u2f(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

const char* ggml_type_label(uint32_t id) {
  static const char* const kNames[] = {
      "f32",   "f16",        "q4_0",       "q4_1",       "q4_2(removed)", "q4_3(removed)", "q5_0",
      "q5_1",  "q8_0",       "q8_1",       "q2_k",       "q3_k",          "q4_k",          "q5_k",
      "q6_k",  "q8_k",       "iq2_xxs",    "iq2_xs",     "iq3_xxs",       "iq1_s",         "iq4_nl",
      "iq3_s", "iq2_s",      "iq4_xs",     "i8",         "i16",           "i32",           "i64",
      "f64",   "iq1_m",      "bf16",       "q4_0_4_4",   "q4_0_4_8",      "q4_0_8_8",      "tq1_0",
      "tq2_0", "iq4_nl_4_4", "iq4_nl_4_8", "iq4_nl_8_8", "mxfp4",         "nvfp4"};
  return id < sizeof(kNames) / sizeof(kNames[0]) ? kNames[id] : "unknown";
}

}  // namespace

namespace {

struct TypeInfo {
  DType type;
  uint32_t ggml_id;
  const char* name;
  int64_t block_size;
  size_t block_bytes;
};

constexpr TypeInfo kTypes[] = {
    {DType::F32, 0, "f32", 1, 4},
    {DType::F16, 1, "f16", 1, 2},
    {DType::BF16, 30, "bf16", 1, 2},
    {DType::Q8_0, 8, "q8_0", kQ8Block, sizeof(BlockQ8_0)},
    {DType::Q4_0, 2, "q4_0", kQ4Block, sizeof(BlockQ4_0)},
    {DType::Q4_1, 3, "q4_1", kQ4Block, sizeof(BlockQ4_1)},
    {DType::Q5_0, 6, "q5_0", kQ4Block, sizeof(BlockQ5_0)},
    {DType::Q5_1, 7, "q5_1", kQ4Block, sizeof(BlockQ5_1)},
    {DType::Q2_K, 10, "q2_k", kQK, sizeof(BlockQ2_K)},
    {DType::Q3_K, 11, "q3_k", kQK, sizeof(BlockQ3_K)},
    {DType::Q4_K, 12, "q4_k", kQK, sizeof(BlockQ4_K)},
    {DType::Q5_K, 13, "q5_k", kQK, sizeof(BlockQ5_K)},
    {DType::Q6_K, 14, "q6_k", kQK, sizeof(BlockQ6_K)},
    {DType::IQ4_NL, 20, "iq4_nl", kQ4Block, sizeof(BlockIQ4_NL)},
    {DType::IQ4_XS, 23, "iq4_xs", kQK, sizeof(BlockIQ4_XS)},
    {DType::MXFP4, 39, "mxfp4", kQ4Block, sizeof(BlockMXFP4)},
};
static_assert(sizeof(kTypes) / sizeof(kTypes[0]) == sizeof(kAllDTypes) / sizeof(kAllDTypes[0]));

const TypeInfo& info(DType type) {
  const auto i = static_cast<size_t>(type);
  if (i >= sizeof(kTypes) / sizeof(kTypes[0])) fail("invalid DType {}", static_cast<int>(type));
  return kTypes[i];
}

}  // namespace

DType dtype_from_ggml(uint32_t type_id) {
  for (const TypeInfo& t : kTypes) {
    if (t.ggml_id == type_id) return t.type;
  }
  fail(
      "unsupported ggml tensor type {} (id {}); kvslim computes with f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, "
      "q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs and mxfp4",
      ggml_type_label(type_id), type_id);
}

uint32_t ggml_type_id(DType type) { return info(type).ggml_id; }

const char* dtype_name(DType type) {
  const auto i = static_cast<size_t>(type);
  return i < sizeof(kTypes) / sizeof(kTypes[0]) ? kTypes[i].name : "invalid";
}

DType dtype_from_name(const char* name) {
  if (name == nullptr) fail("dtype name is null");
  const std::string_view n(name);
  for (const TypeInfo& t : kTypes) {
    if (n == t.name) return t.type;
  }
  fail(
      "unknown dtype '{}' (expected f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, "
      "iq4_nl, iq4_xs or mxfp4)",
      n);
}

int64_t dtype_block_size(DType type) { return info(type).block_size; }
size_t dtype_block_bytes(DType type) { return info(type).block_bytes; }

double dtype_bits_per_weight(DType type) {
  const TypeInfo& t = info(type);
  return 8.0 * static_cast<double>(t.block_bytes) / static_cast<double>(t.block_size);
}

size_t row_bytes(DType type, int64_t n) {
  if (n < 0) fail("negative row length {}", n);
  const TypeInfo& t = info(type);
  if (n % t.block_size != 0) fail("{} row length {} is not a multiple of its block size {}", t.name, n, t.block_size);
  return static_cast<size_t>(n / t.block_size) * t.block_bytes;
}

// ---------------------------------------------------------------------------------------------
// Scalar conversions.

namespace detail {

float fp16_to_fp32_portable(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) {  // inf, or a nan made quiet (as F16C does)
    return u2f(sign | 0x7f800000u | (mant != 0 ? 0x400000u : 0u) | (mant << 13));
  }
  if (exp == 0) {
    if (mant == 0) return u2f(sign);
    return u2f(sign | f2u(static_cast<float>(mant) * 0x1p-24f));  // exact
  }
  return u2f(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t fp32_to_fp16_portable(float f) {
  uint32_t x = f2u(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  // inf or nan: keep the top payload bits, force a quiet nan
    if (ax > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    return static_cast<uint16_t>(sign | 0x7c00u);
  }
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (ax < 0x38800000u) {
    // Result is subnormal or zero: adding 0.5 aligns the value so that the fp32 adder performs
    // the round-to-nearest-even at 2^-24 for us.
    const float r = u2f(ax) + 0.5f;
    return static_cast<uint16_t>(sign | (f2u(r) - 0x3f000000u));
  }
  const uint32_t odd = (ax >> 13) & 1u;
  ax += 0xc8000fffu + odd;  // rebias the exponent (-112 << 23) and round to nearest even
  return static_cast<uint16_t>(sign | (ax >> 13));
}

}  // namespace detail

// The baseline build has no F16C; kernels use their level's one-instruction versions (simd.h).
float fp16_to_fp32(uint16_t h) { return detail::fp16_to_fp32_portable(h); }

uint16_t fp32_to_fp16(float f) { return detail::fp32_to_fp16_portable(f); }

float bf16_to_fp32(uint16_t h) { return u2f(static_cast<uint32_t>(h) << 16); }

uint16_t fp32_to_bf16(float f) {
  const uint32_t x = f2u(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet nan
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace kvslim
