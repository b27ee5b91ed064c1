#include "press/select.h"

#include <algorithm>
#include <numeric>

#include "util/error.h"

namespace kvslim {

std::vector<int32_t> all_indices(int64_t n) {
  std::vector<int32_t> idx(std::max<int64_t>(n, 0));
  std::iota(idx.begin(), idx.end(), 0);
  return idx;
}

void all_but_lowest(std::span<const float> scores, int64_t candidates, std::vector<int32_t>& keep) {
  const int64_t n = int64_t(scores.size());
  int64_t victim = 0;
  for (int64_t i = 1; i < std::min(candidates, n); ++i)
    if (scores[i] <= scores[victim]) victim = i;
  keep.clear();
  for (int64_t i = 0; i < n; ++i)
    if (i != victim) keep.push_back(int32_t(i));
}

std::vector<int32_t> top_k_ascending(std::span<const float> scores, int64_t k) {
  const int64_t n = int64_t(scores.size());
  if (k >= n) return all_indices(n);
  if (k <= 0) return {};
  std::vector<int32_t> idx = all_indices(n);
  auto better = [&](int32_t a, int32_t b) { return scores[a] > scores[b] || (scores[a] == scores[b] && a < b); };
  std::nth_element(idx.begin(), idx.begin() + k, idx.end(), better);
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  return idx;
}

PoolKind pool_kind_from_name(const std::string& name) {
  if (name == "none") return PoolKind::None;
  if (name == "max") return PoolKind::Max;
  if (name == "avg") return PoolKind::Avg;
  fail("unknown pooling '{}' (valid: none, max, avg)", name);
}

std::vector<float> pool1d(std::span<const float> scores, int kernel, PoolKind kind) {
  std::vector<float> out(scores.begin(), scores.end());
  if (kind == PoolKind::None || kernel <= 1) return out;
  const int64_t n = int64_t(scores.size()), half = kernel / 2;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t lo = std::max<int64_t>(0, i - half), hi = std::min<int64_t>(n - 1, i + half);
    if (kind == PoolKind::Max) {
      float m = scores[lo];
      for (int64_t j = lo + 1; j <= hi; ++j) m = std::max(m, scores[j]);
      out[i] = m;
    } else {
      double s = 0;
      for (int64_t j = lo; j <= hi; ++j) s += scores[j];
      out[i] = float(s / kernel);
    }
  }
  return out;
}

std::vector<int32_t> window_plus_top(std::span<const float> prefix_scores, int64_t n, int64_t window, int64_t budget) {
  if (budget >= n) return all_indices(n);
  window = std::min(window, n);
  if (budget <= window) {
    std::vector<int32_t> last(budget);
    std::iota(last.begin(), last.end(), int32_t(n - budget));
    return last;
  }
  std::vector<int32_t> keep = top_k_ascending(prefix_scores.first(n - window), budget - window);
  for (int64_t i = n - window; i < n; ++i) keep.push_back(int32_t(i));
  return keep;
}

}  // namespace kvslim
