// An AttentionProbe that sums attention rows per (layer, query head) over the first `n_keys`
// cache indices, for the queries at or after a given position: SnapKV's window queries, H2O's
// every prompt query, DapQ's pseudo queries, TOVA's last query.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/paged_cache.h"
#include "model/config.h"

namespace kvslim {

class AttentionAccumulator final : public AttentionProbe {
 public:
  // Clears the sums; rows of queries at positions >= from_position are summed over keys
  // 0..n_keys-1 (keys a query cannot see count zero).
  void reset(const ModelConfig& config, int64_t n_keys, int64_t from_position);

  void on_row(int layer, int q_head, int64_t query_position, const float* probs, int64_t n_visible) override;

  int64_t n_keys() const { return n_keys_; }
  const float* q_head_sums(int layer, int q_head) const {
    return &sums_[(size_t(layer) * n_heads_ + q_head) * n_keys_];
  }
  // Mean over the query heads that read `kv_head` (docs/methods.md: a GQA group is reduced by its
  // mean).
  std::vector<float> group_mean(int layer, int kv_head) const;

 private:
  int n_heads_ = 0, group_ = 1;
  int64_t n_keys_ = 0, from_position_ = 0;
  std::vector<float> sums_;  // [layer][q head][n_keys]
};

}  // namespace kvslim
