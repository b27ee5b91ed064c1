// The eviction-ready KV cache: one HeadCache per (layer, KV head), pages from one PagePool,
// dense attention over what each head keeps, optional sparse attention over a per-head subset
// at decode, and probes that let a method see attention probabilities as they are computed.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include "kv/attention.h"
#include "kv/head_cache.h"
#include "kv/kv_cache.h"
#include "kv/kv_shape.h"
#include "kv/page_pool.h"

namespace kvslim {

// Receives softmax rows while attention runs. Called concurrently for different query heads of
// a layer, never concurrently for the same query head.
class AttentionProbe {
 public:
  virtual ~AttentionProbe() = default;
  // Query head `q_head` of the token at original position `query_position` attends over the
  // first `n_visible` tokens of its KV head (cache indices 0..n_visible-1) with probabilities
  // `probs`.
  virtual void on_row(int layer, int q_head, int64_t query_position, const float* probs, int64_t n_visible) = 0;
  // The block's queries after RoPE, before its rows: q is [n][n_heads * head_dim], query i at
  // original position first_position + i (blocks run consecutive positions). Called once per
  // layer and block, from the thread that runs attention; a method that ranks by the queries
  // themselves (a Python press's `queries`) overrides it.
  virtual void on_queries(int layer, const float* q, int n, int64_t first_position) {}
};

// Chooses, at a decode step, which cached tokens each KV head's attention reads.
class SparseSelector {
 public:
  virtual ~SparseSelector() = default;
  // q: the decode token's queries [n_heads][head_dim]. Fill selected[kv_head] with strictly
  // ascending cache indices (the newest token must be included by the selector if wanted).
  // Return false to use dense attention for this layer. `pool` may be used to work on the KV
  // heads in parallel.
  virtual bool select(int layer, const float* q, const class PagedKvCache& cache,
                      std::vector<std::vector<int32_t>>& selected, ThreadPool& pool) = 0;
};

class PagedKvCache final : public KvCache {
 public:
  // capacity: the most tokens any one head may hold (the context size). Pages store keys and
  // values in shape.key_type / shape.value_type. Throws kvslim::Error for a shape or type that
  // cannot be stored.
  PagedKvCache(const KvShape& shape, int64_t capacity, int page_tokens = 256);
  ~PagedKvCache() override;

  void append(int layer, const float* k, const float* v, int n, const int64_t* positions) override;
  // Dense causal attention (with the layer's sinks, if any, in every softmax); with a probe set,
  // every softmax row is reported (summing to 1 minus the sink's share). For n == 1 and a
  // selector set, attention reads only the selected tokens (the probe then sees nothing). On a
  // sliding-window layer attention is masked to the window, and neither the probe nor the
  // selector runs: no method governs such a layer.
  void attend(int layer, const float* q, int n, float* out, ThreadPool& pool) override;
  int64_t n_tokens(int layer) const override;  // the largest head of the layer
  int64_t capacity() const override { return capacity_; }
  uint64_t bytes_in_use() const override { return pool_.bytes_in_use(); }
  uint64_t peak_bytes() const override { return pool_.peak_bytes_in_use(); }

  // Appended rows (DapQ, LookaheadKV, LAQ) briefly hold tokens beyond the request's capacity.
  void set_capacity(int64_t capacity) { capacity_ = capacity; }
  void set_probe(AttentionProbe* probe) { probe_ = probe; }
  void set_sparse_selector(SparseSelector* selector) { selector_ = selector; }

  int n_layers() const { return n_layers_; }
  // Sliding-window layers (KvShape::layer_window): a local layer's window, 0 for a global one.
  int window(int layer) const { return windows_.empty() ? 0 : windows_[size_t(layer)]; }
  bool is_local(int layer) const { return window(layer) > 0; }
  // Layer `layer`'s sink logits (KvShape::layer_sinks), one per query head; nullptr: none. Methods
  // that compute attention rows themselves put them in the denominator as the kernels do.
  const float* sinks(int layer) const override {
    return sinks_.empty() || sinks_[size_t(layer)].empty() ? nullptr : sinks_[size_t(layer)].data();
  }
  // Query head q_head's sink logit on `layer`, -inf (no effect on a softmax) without sinks.
  float sink_logit(int layer, int q_head) const {
    const float* s = sinks(layer);
    return s != nullptr ? s[q_head] : -std::numeric_limits<float>::infinity();
  }
  // The layers a compression method governs (every layer of a model without sliding windows).
  const std::vector<int>& global_layers() const { return global_layers_; }
  // Drops, on every local layer, the tokens no query from `next_position` on can see (positions
  // <= next_position - window): the session calls it after each block it runs, so that a local
  // layer holds window - 1 tokens between blocks and at most window - 1 + block during one.
  void slide_windows(int64_t next_position);
  int n_kv_heads() const { return n_kv_heads_; }
  int n_heads() const { return n_heads_; }
  int head_dim() const { return head_dim_; }
  DType key_type() const { return pool_.key_type(); }
  DType value_type() const { return pool_.value_type(); }
  HeadCache& head(int layer, int kv_head) { return heads_[size_t(layer) * n_kv_heads_ + kv_head]; }
  const HeadCache& head(int layer, int kv_head) const { return heads_[size_t(layer) * n_kv_heads_ + kv_head]; }
  PagePool& pool() { return pool_; }
  const PagePool& pool() const { return pool_; }
  int page_tokens() const { return pool_.page_tokens(); }

  // Token-exact accounting (pages round up): sum over heads of kept tokens.
  int64_t total_tokens() const;

 private:
  int n_layers_, n_heads_, n_kv_heads_, head_dim_;
  std::vector<int> windows_, global_layers_;
  std::vector<std::vector<float>> sinks_;  // [layer][query head], empty: no sinks
  int64_t capacity_;
  PagePool pool_;
  std::vector<HeadCache> heads_;  // [layer][kv head]
  AttentionProbe* probe_ = nullptr;
  SparseSelector* selector_ = nullptr;
  std::vector<AttentionScratch> scratch_;       // one per pool thread
  std::vector<std::vector<int32_t>> selected_;  // per KV head, reused every decode step
};

}  // namespace kvslim
