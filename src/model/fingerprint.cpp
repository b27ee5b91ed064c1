#include "model/fingerprint.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string_view>

namespace kvslim {

namespace {

class Fnv1a64 {
 public:
  void bytes(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) hash_ = (hash_ ^ p[i]) * 0x100000001b3ull;
  }
  void text(std::string_view s) {
    u64(s.size());
    bytes(s.data(), s.size());
  }
  void u64(uint64_t v) { bytes(&v, sizeof v); }  // little-endian hosts only, as the GGUF reader
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ull;
};

constexpr uint64_t kWholeTensorBytes = 4096, kSlices = 16, kSliceBytes = 256;

}  // namespace

uint64_t model_fingerprint(const Model& model) {
  Fnv1a64 h;
  h.text("kvslim-model-fingerprint-v1");
  const ModelConfig& c = model.config();
  h.text(arch_name(c.arch));
  for (int v : {c.n_layers, c.dim, c.ffn_dim, c.n_heads, c.n_kv_heads, c.head_dim, c.n_rot, c.n_vocab})
    h.u64(uint64_t(int64_t(v)));
  h.u64(std::bit_cast<uint32_t>(c.rms_eps));
  h.u64(std::bit_cast<uint32_t>(c.rope_base));

  const gguf::File& file = model.file();
  std::vector<const gguf::TensorInfo*> tensors;
  for (const auto& t : file.tensors()) tensors.push_back(&t);
  std::sort(tensors.begin(), tensors.end(), [](const auto* a, const auto* b) { return a->name < b->name; });
  for (const gguf::TensorInfo* t : tensors) {
    h.text(t->name);
    h.u64(t->type);
    h.u64(t->dims.size());
    for (uint64_t d : t->dims) h.u64(d);
    const uint8_t* data = file.tensor_data(*t);
    if (t->n_bytes <= kWholeTensorBytes) {
      h.bytes(data, t->n_bytes);
      continue;
    }
    for (uint64_t i = 0; i < kSlices; ++i) h.bytes(data + i * (t->n_bytes - kSliceBytes) / (kSlices - 1), kSliceBytes);
  }
  return h.value();
}

}  // namespace kvslim
