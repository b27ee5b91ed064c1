#include "eval/oracle.h"

#include "eval/intrinsic_math.h"
#include "press/select.h"

namespace kvslim::eval {

OracleSets oracle_sets(const AttentionAccumulator& response_attention, int n_layers, int n_kv_heads, int64_t budget) {
  OracleSets sets;
  for (int l = 0; l < n_layers; ++l)
    for (int h = 0; h < n_kv_heads; ++h) {
      // The mean over response queries is the sum over a constant count: the same ranking.
      const std::vector<int32_t> top = top_k_ascending(response_attention.group_mean(l, h), budget);
      sets.emplace_back(top.begin(), top.end());
    }
  return sets;
}

double recall_at_budget(const PagedKvCache& cache, const OracleSets& oracle, int64_t n_keys) {
  double total = 0;
  std::vector<int64_t> kept;
  // Over the layers a method governs (a sliding-window layer keeps its window whatever it does).
  for (int l : cache.global_layers())
    for (int h = 0; h < cache.n_kv_heads(); ++h) {
      const HeadCache& head = cache.head(l, h);
      kept.clear();
      for (int64_t i = 0; i < head.size() && head.position(i) < n_keys; ++i) kept.push_back(head.position(i));
      total += recall(kept, oracle[size_t(l) * cache.n_kv_heads() + h]);
    }
  const size_t heads = cache.global_layers().size() * size_t(cache.n_kv_heads());
  return heads == 0 ? 0.0 : total / double(heads);
}

}  // namespace kvslim::eval
