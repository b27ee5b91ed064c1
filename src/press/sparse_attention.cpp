#include "press/sparse_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
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

namespace {

// A float's bits as an unsigned key of the same order (negative values flipped, positive ones
// above them); NaN is not ordered.
inline uint32_t order_key(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

inline float from_order_key(uint32_t key) {
  const uint32_t u = (key & 0x80000000u) ? (key & 0x7fffffffu) : ~key;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace

float kth_largest(std::span<const float> values, int64_t k, std::vector<uint32_t>& keys) {
  keys.resize(values.size());
  for (size_t i = 0; i < values.size(); ++i) keys[i] = order_key(values[i]);
  // Most significant digit first (11, 11, 10 bits): count the candidates per digit, keep the
  // digit holding the k-th largest, and only the candidates with that digit go on.
  size_t live = keys.size();
  uint32_t prefix = 0;
  uint32_t count[2048];
  for (const auto& [shift, bits] : {std::pair{21, 11}, std::pair{10, 11}, std::pair{0, 10}}) {
    const uint32_t bins = 1u << bits;
    std::fill(count, count + bins, 0u);
    for (size_t i = 0; i < live; ++i) ++count[(keys[i] >> shift) & (bins - 1)];
    uint32_t digit = bins - 1;
    while (int64_t(count[digit]) < k) k -= count[digit--];
    prefix |= digit << shift;
    size_t kept = 0;
    for (size_t i = 0; i < live; ++i)
      if (((keys[i] >> shift) & (bins - 1)) == digit) keys[kept++] = keys[i];
    live = kept;
  }
  return from_order_key(prefix);
}

void top_k_with_newest(std::span<float> scores, int64_t k, std::vector<uint32_t>& work, std::vector<int32_t>& out) {
  const int64_t n = int64_t(scores.size());
  out.clear();
  k = std::min(k, n);
  if (k <= 0) return;
  scores[n - 1] = std::numeric_limits<float>::infinity();
  if (k == n) {
    out.resize(size_t(n));
    std::iota(out.begin(), out.end(), 0);
    return;
  }
  // The k-th largest value is the threshold: every score above it is in, and of the scores equal
  // to it the lowest indices fill the rest. Finding it by radix selection (rather than ordering
  // an index array through an indirect comparator and sorting the winners) costs a few linear
  // passes, and one ascending pass then emits the set already sorted.
  const float threshold = kth_largest(scores, k, work);
  int64_t above = 0, equal = 0;
  for (const float s : scores) {
    above += s > threshold;
    equal += s == threshold;
  }
  int64_t ties = k - above;    // scores equal to the threshold to take, lowest index first
  out.resize(size_t(k) + 16);  // slack for the kernel's 16-wide stores
  int64_t m = 0;
  if (ties == equal) {
    // Every tie is taken: the set is simply scores >= threshold (the common case).
    m = indices_at_least(scores.data(), n, threshold, out.data());
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const float s = scores[size_t(i)];
      if (s > threshold || (s == threshold && ties-- > 0)) out[size_t(m++)] = int32_t(i);
    }
  }
  out.resize(size_t(m));
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

void add_softmax(std::span<float> logits, float weight, std::span<float> acc, float sink) {
  softmax_inplace(logits.data(), int64_t(logits.size()), sink);
  for (size_t j = 0; j < logits.size(); ++j) acc[j] += weight * logits[j];
}

}  // namespace kvslim
