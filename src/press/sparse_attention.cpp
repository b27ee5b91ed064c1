#include "press/sparse_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "tensor/ops.h"

namespace kvslim {

bool SparseAttentionPress::select(int layer, const float* q, const PagedKvCache& cache,
                                  std::vector<std::vector<int32_t>>& selected, ThreadPool& pool) {
  const int n_kv = cache.n_kv_heads(), group = cache.n_heads() / n_kv, d = cache.head_dim();
  if (int(selected.size()) < n_kv) selected.resize(n_kv);
  if (int(scratch_.size()) < n_kv) scratch_.resize(n_kv);
  head_is_sparse_.assign(n_kv, 0);
  pool.parallel_for_fn(n_kv, [&](int64_t begin, int64_t end) {
    for (int64_t h = begin; h < end; ++h) {
      std::vector<int32_t>& out = selected[h];
      out.clear();
      if (select_head(layer, int(h), q + size_t(h) * group * d, cache, out, scratch_[h])) {
        head_is_sparse_[h] = 1;
      } else {
        out.resize(cache.head(layer, int(h)).size());
        std::iota(out.begin(), out.end(), 0);
      }
    }
  });
  return std::find(head_is_sparse_.begin(), head_is_sparse_.end(), 1) != head_is_sparse_.end();
}

void top_k_with_newest(std::span<float> scores, int64_t k, std::vector<int32_t>& order, std::vector<int32_t>& out) {
  const int64_t n = int64_t(scores.size());
  k = std::min(k, n);
  scores[n - 1] = std::numeric_limits<float>::infinity();
  order.resize(n);
  std::iota(order.begin(), order.end(), 0);
  auto better = [&](int32_t a, int32_t b) { return scores[a] > scores[b] || (scores[a] == scores[b] && a < b); };
  std::nth_element(order.begin(), order.begin() + k, order.end(), better);
  std::sort(order.begin(), order.begin() + k);
  out.assign(order.begin(), order.begin() + k);
}

void top_channels(const float* q_group, int group, int head_dim, int r, std::vector<float>& magnitude,
                  std::vector<int32_t>& channels) {
  magnitude.assign(head_dim, 0.0f);
  for (int g = 0; g < group; ++g)
    for (int c = 0; c < head_dim; ++c) magnitude[c] += std::abs(q_group[size_t(g) * head_dim + c]);
  channels.resize(head_dim);
  std::iota(channels.begin(), channels.end(), 0);
  auto better = [&](int32_t a, int32_t b) {
    return magnitude[a] > magnitude[b] || (magnitude[a] == magnitude[b] && a < b);
  };
  std::nth_element(channels.begin(), channels.begin() + r, channels.end(), better);
  channels.resize(r);
  std::sort(channels.begin(), channels.end());
}

float sparq_scale(const float* q, std::span<const int32_t> channels, int head_dim) {
  float selected = 0.0f, all = 0.0f;
  for (int32_t c : channels) selected += std::abs(q[c]);
  for (int c = 0; c < head_dim; ++c) all += std::abs(q[c]);
  const float scale = all > 0.0f ? std::sqrt(float(head_dim) * selected / all) : 0.0f;
  return scale > 0.0f ? scale : 1.0f;
}

void add_softmax(std::span<float> logits, float weight, std::span<float> acc) {
  softmax_inplace(logits.data(), int64_t(logits.size()));
  for (size_t j = 0; j < logits.size(); ++j) acc[j] += weight * logits[j];
}

}  // namespace kvslim
