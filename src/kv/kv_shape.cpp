#include "kv/kv_shape.h"

#include "util/error.h"

namespace kvslim {

bool is_kv_type(DType type) {
  return type == DType::F32 || type == DType::F16 || type == DType::BF16 || type == DType::Q8_0;
}

DType kv_type_from_name(const std::string& name, const std::string& option) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0})
    if (name == dtype_name(t)) return t;
  fail("{} '{}' is not a KV cache type (valid: f32, f16, bf16, q8_0)", option, name);
}

size_t kv_row_bytes(DType type, int head_dim) { return row_bytes(type, head_dim); }

void validate_kv_shape(const KvShape& s) {
  if (s.n_layers < 1 || s.n_kv_heads < 1 || s.n_heads < s.n_kv_heads || s.n_heads % s.n_kv_heads != 0)
    fail("KV cache: {} layers with {} query heads over {} KV heads is not a valid shape", s.n_layers, s.n_heads,
         s.n_kv_heads);
  if (!s.layer_window.empty() && s.layer_window.size() != size_t(s.n_layers))
    fail("KV cache: {} layer windows for {} layers", s.layer_window.size(), s.n_layers);
  for (int w : s.layer_window)
    if (w < 0) fail("KV cache: a sliding window must be >= 0 tokens (got {})", w);
  if (!s.layer_sinks.empty() && s.layer_sinks.size() != size_t(s.n_layers))
    fail("KV cache: sink logits for {} layers, the model has {}", s.layer_sinks.size(), s.n_layers);
  for (size_t l = 0; l < s.layer_sinks.size(); ++l)
    if (!s.layer_sinks[l].empty() && s.layer_sinks[l].size() != size_t(s.n_heads))
      fail("KV cache: layer {} has {} sink logits for {} query heads", l, s.layer_sinks[l].size(), s.n_heads);
  if (s.head_dim < 1) fail("KV cache: head_dim must be >= 1 (got {})", s.head_dim);
  for (const auto& [type, what] : {std::pair{s.key_type, "key"}, std::pair{s.value_type, "value"}}) {
    if (!is_kv_type(type)) fail("KV cache: {} type {} is not one of f32, f16, bf16, q8_0", what, dtype_name(type));
    if (type == DType::Q8_0 && s.head_dim % kQ8Block != 0)
      fail("KV cache: {} type q8_0 needs a head size that is a multiple of {} (this model's is {})", what, kQ8Block,
           s.head_dim);
  }
}

}  // namespace kvslim
