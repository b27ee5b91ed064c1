// The simple cache: every token of every (layer, KV head) kept, f32, in one preallocated block
// per (layer, KV head) so that attention reads contiguous rows and decode allocates nothing.
#pragma once

#include <vector>

#include "kv/attention.h"
#include "kv/kv_cache.h"
#include "model/config.h"

namespace kvslim {

class DenseKvCache final : public KvCache {
 public:
  DenseKvCache(const ModelConfig& config, int64_t capacity);

  void append(int layer, const float* k, const float* v, int n, const int64_t* positions) override;
  void attend(int layer, const float* q, int n, float* out, ThreadPool& pool) override;
  int64_t n_tokens(int layer) const override { return lengths_[layer]; }
  int64_t capacity() const override { return capacity_; }
  uint64_t bytes_in_use() const override;
  uint64_t peak_bytes() const override { return peak_bytes_; }

  const std::vector<int64_t>& positions(int layer) const { return positions_[layer]; }

 private:
  float* keys(int layer, int head) { return keys_.data() + (int64_t(layer) * n_kv_heads_ + head) * capacity_ * head_dim_; }
  float* values(int layer, int head) { return values_.data() + (int64_t(layer) * n_kv_heads_ + head) * capacity_ * head_dim_; }

  int n_layers_, n_heads_, n_kv_heads_, head_dim_;
  int64_t capacity_;
  std::vector<float> keys_, values_;  // [layer][kv head][capacity][head_dim]
  std::vector<int64_t> lengths_;
  std::vector<std::vector<int64_t>> positions_;
  uint64_t peak_bytes_ = 0;
  std::vector<AttentionScratch> scratch_;  // one per pool thread
};

}  // namespace kvslim
