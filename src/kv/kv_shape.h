// The shape and storage types of a KV cache, as the kv layer sees them: it is filled from the
// model's config by the layers above (model/config.h kv_shape), so kv/ never includes model/.
#pragma once

#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace kvslim {

struct KvShape {
  int n_layers = 0;
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // heads with their own keys and values (n_heads is a multiple)
  int head_dim = 0;
  // Element types of the stored key and value rows (llama.cpp's --cache-type-k/-v): f32, f16,
  // bf16 or q8_0 (head_dim a multiple of 32). The kernels read these types directly.
  DType key_type = DType::F32;
  DType value_type = DType::F32;
  // Sliding-window layers: layer_window[l] > 0 is layer l's window (a query at position p reads
  // the keys at positions in (p - window, p]), 0 a global layer; empty: every layer is global.
  std::vector<int> layer_window;
  // Attention sinks (gpt-oss's attn_sinks): layer_sinks[l] holds one learned logit per query head
  // of layer l, joining each of that head's softmax rows (kv/attention.h PagedKv::sinks); empty
  // (or an empty layer): no sinks. Learned values, not a shape, but the cache is where every
  // softmax over its tokens is taken, and presses read them from there (PagedKvCache::sinks).
  std::vector<std::vector<float>> layer_sinks;
};

// True for the four types a KV page may hold.
bool is_kv_type(DType type);
// "f32", "f16", "bf16", "q8_0" -> DType; throws kvslim::Error naming `option` and the valid names.
DType kv_type_from_name(const std::string& name, const std::string& option);
// Bytes one stored row of `head_dim` elements takes (q8_0: 34 bytes per 32 elements).
size_t kv_row_bytes(DType type, int head_dim);
// Throws kvslim::Error when the shape or its types cannot be stored (q8_0 with a head_dim that is
// not a multiple of 32, a type outside the four).
void validate_kv_shape(const KvShape& shape);
// Layer `layer`'s window, 0 for a global layer.
inline int layer_window(const KvShape& shape, int layer) {
  return shape.layer_window.empty() ? 0 : shape.layer_window[size_t(layer)];
}

}  // namespace kvslim
