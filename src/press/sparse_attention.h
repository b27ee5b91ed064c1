// The common shape of decode-time sparse attention methods (Exact-TopK, Quest, SparQ, RocketKV
// stage 2): at each decode step and layer, each KV head picks the cached tokens its attention
// reads from the decode token's queries. The budget is token traffic per KV head per step.
// The newest token (the decode token itself, cache index size-1) is always read.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/attention.h"
#include "press/press.h"

namespace kvslim {

// Buffers one KV head's selection reuses at every decode step (no allocation once warm). Each
// KV head has its own, so that heads are selected in parallel.
struct SelectScratch {
  std::vector<float> scores, logits, page_scores, magnitude;
  std::vector<uint32_t> work;             // top_k_with_newest
  std::vector<float> row;                 // one key decoded from an f16/bf16/q8_0 page
  std::vector<int32_t> channels, picked;  // picked: pages or slots chosen
  std::vector<uint64_t> order;            // pages as sort keys (RocketKV)
  std::vector<int32_t> taken;             // slots taken from each page (RocketKV)
  AttentionScratch attention;             // for attention_scores (exact scores of the whole head)
};

class SparseAttentionPress : public Press, public SparseSelector {
 public:
  SparseSelector* sparse_selector() override { return this; }

  // Asks select_head for every KV head of the layer, heads in parallel on `pool`; the layer
  // attends densely (bit-identical to no compression) when no head needs a subset.
  bool select(int layer, const float* q, const PagedKvCache& cache, std::vector<std::vector<int32_t>>& selected,
              ThreadPool& pool) override;

 protected:
  // q_group: the queries [group][head_dim] of the query heads reading `kv_head`. Fills `out`
  // with strictly ascending cache indices and returns true, or returns false to read every
  // token of the head. Called concurrently for different KV heads: touch only that head's
  // state and `scratch`.
  virtual bool select_head(int layer, int kv_head, const float* q_group, const PagedKvCache& cache,
                           std::vector<int32_t>& out, SelectScratch& scratch) = 0;

 private:
  std::vector<SelectScratch> scratch_;  // [kv head]
  std::vector<char> head_is_sparse_;    // [kv head], this step
};

// The k best of `scores` (ties: lower index), always including the last index; ascending in
// `out`. Overwrites the last score; `work` is scratch. Scores must not be NaN.
void top_k_with_newest(std::span<float> scores, int64_t k, std::vector<uint32_t>& work, std::vector<int32_t>& out);

// The k-th largest of `values` (1 <= k <= size; no NaN) by radix selection on the float bits;
// `keys` is scratch.
float kth_largest(std::span<const float> values, int64_t k, std::vector<uint32_t>& keys);

// SparQ's channel choice (SparQ §3, step 1; RocketKV §3.4 step 2): the r channels of largest
// Σ_group |q_i| over the group's queries [group][head_dim], ties to the lower channel, ascending.
void top_channels(const float* q_group, int group, int head_dim, int r, std::vector<float>& magnitude,
                  std::vector<int32_t>& channels);

// SparQ's softmax temperature for logits computed on `channels` only:
// sqrt(head_dim * Σ_sel |q_i| / Σ_all |q_i|); 1 when that is 0 (the query reads nothing).
float sparq_scale(const float* q, std::span<const int32_t> channels, int head_dim);

// acc[j] += weight * softmax(logits)[j]; logits is overwritten with the probabilities.
// With weight 1/group over a group's query heads this is the group-mean attention. `sink`: the
// query head's attention-sink logit (PagedKvCache::sink_logit), in the denominator as the
// kernels put it; -inf: none.
void add_softmax(std::span<float> logits, float weight, std::span<float> acc, float sink);

}  // namespace kvslim
