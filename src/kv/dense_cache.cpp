#include "kv/dense_cache.h"

#include <algorithm>
#include <cstring>

#include "util/error.h"

namespace kvslim {

DenseKvCache::DenseKvCache(const ModelConfig& c, int64_t capacity)
    : n_layers_(c.n_layers), n_heads_(c.n_heads), n_kv_heads_(c.n_kv_heads), head_dim_(c.head_dim),
      capacity_(capacity),
      keys_(size_t(c.n_layers) * c.n_kv_heads * capacity * c.head_dim),
      values_(keys_.size()),
      lengths_(c.n_layers, 0),
      positions_(c.n_layers) {
  for (auto& p : positions_) p.reserve(capacity);
}

void DenseKvCache::append(int layer, const float* k, const float* v, int n, const int64_t* positions) {
  int64_t& len = lengths_[layer];
  if (len + n > capacity_) fail("KV cache full: {} + {} tokens exceed the context of {}", len, n, capacity_);
  const int64_t kv_dim = int64_t(n_kv_heads_) * head_dim_;
  for (int h = 0; h < n_kv_heads_; ++h) {
    float* kd = keys(layer, h) + len * head_dim_;
    float* vd = values(layer, h) + len * head_dim_;
    for (int t = 0; t < n; ++t) {
      std::memcpy(kd + t * head_dim_, k + t * kv_dim + h * head_dim_, head_dim_ * sizeof(float));
      std::memcpy(vd + t * head_dim_, v + t * kv_dim + h * head_dim_, head_dim_ * sizeof(float));
    }
  }
  positions_[layer].insert(positions_[layer].end(), positions, positions + n);
  len += n;
  peak_bytes_ = std::max(peak_bytes_, bytes_in_use());
}

void DenseKvCache::attend(int layer, const float* q, int n, float* out, ThreadPool& pool) {
  if (scratch_.size() < size_t(pool.size())) {
    // Sized once for the largest query tile over a full cache, so decode never reallocates.
    scratch_.resize(pool.size());
    for (auto& s : scratch_) s.scores.resize(size_t(kAttentionQueryTile) * capacity_);
  }
  const int group = n_heads_ / n_kv_heads_;
  const int64_t q_dim = int64_t(n_heads_) * head_dim_;
  const int64_t n_keys = lengths_[layer];
  pool.run([&](int thread, int n_threads) {
    for (int h = thread; h < n_heads_; h += n_threads) {
      const int kv_head = h / group;
      attend_causal(q + h * head_dim_, q_dim, n, keys(layer, kv_head), values(layer, kv_head), n_keys, head_dim_,
                    out + h * head_dim_, q_dim, scratch_[thread]);
    }
  });
}

uint64_t DenseKvCache::bytes_in_use() const {
  uint64_t tokens = 0;
  for (int64_t len : lengths_) tokens += len;
  return tokens * n_kv_heads_ * head_dim_ * 2 * sizeof(float);
}

}  // namespace kvslim
