// The KV cache interface the forward pass talks to. The engine appends each layer's keys (after
// RoPE) and values and asks the cache to attend; how tokens are stored (and, later, which are
// kept) is the cache's business, so swapping the storage stays local to this layer.
#pragma once

#include <cstdint>

#include "util/thread_pool.h"

namespace kvslim {

class KvCache {
 public:
  virtual ~KvCache() = default;

  // Appends `n` tokens to one layer. k and v are [n][n_kv_heads * head_dim]; positions are the
  // tokens' original positions. Throws kvslim::Error when the capacity would be exceeded.
  virtual void append(int layer, const float* k, const float* v, int n, const int64_t* positions) = 0;

  // Causal attention of the `n` queries of the block most recently appended to `layer`:
  // q and out are [n][n_heads * head_dim]. Query i sees every token held before the block
  // and block tokens 0..i.
  virtual void attend(int layer, const float* q, int n, float* out, ThreadPool& pool) = 0;

  // Layer `layer`'s attention-sink logits, one per query head, or nullptr when it has none (the
  // forward pass checks that a model with sinks got a cache that holds them).
  virtual const float* sinks(int layer) const = 0;

  virtual int64_t n_tokens(int layer) const = 0;
  virtual int64_t capacity() const = 0;
  virtual uint64_t bytes_in_use() const = 0;
  virtual uint64_t peak_bytes() const = 0;
};

}  // namespace kvslim
