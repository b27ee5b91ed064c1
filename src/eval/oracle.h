// The oracle kept set of recall@B (DapQ Eqs. 1-3, LookaheadKV Eq. 1): per (layer, KV head), the
// B prompt positions the model's own greedy response attends to most on the full cache, by the
// attention probability averaged over the response's queries and the group's query heads.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/paged_cache.h"
#include "press/attention_accumulator.h"
#include "press/press.h"

namespace kvslim::eval {

// Installed as the press of a full-cache session, it evicts nothing and only watches decode:
// every decode query's attention on the first `n_keys` cached tokens (the compressed part of
// the prompt) is summed per (layer, query head).
class ResponseAttention final : public Press {
 public:
  explicit ResponseAttention(int64_t n_keys) : n_keys_(n_keys) {}

  AttentionProbe* decode_probe() override { return &sums_; }
  void begin(PressContext& ctx) override { sums_.reset(ctx.config(), n_keys_, 0); }

  const AttentionAccumulator& sums() const { return sums_; }

 private:
  int64_t n_keys_;
  AttentionAccumulator sums_;
};

// Per (layer, KV head), index layer * n_kv_heads + head: the top min(budget, n_keys) positions
// by the group-mean response attention (ties: the lower position), ascending.
using OracleSets = std::vector<std::vector<int64_t>>;
OracleSets oracle_sets(const AttentionAccumulator& response_attention, int n_layers, int n_kv_heads, int64_t budget);

// Mean over (global layer, KV head) of |kept ∩ oracle| / |oracle|, where kept = the original positions
// below n_keys that the cache holds (the compressed part's survivors).
double recall_at_budget(const PagedKvCache& cache, const OracleSets& oracle, int64_t n_keys);

}  // namespace kvslim::eval
