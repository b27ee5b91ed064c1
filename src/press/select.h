// Selection and pooling shared by every method (docs/methods.md, "Rules every method shares"):
// top-k with the lower index winning ties, results in ascending order; 1-D max/avg pooling along
// the sequence.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kvslim {

// Indices of the k largest scores (ties: lower index first), returned in ascending order.
// k >= scores.size() returns every index.
std::vector<int32_t> top_k_ascending(std::span<const float> scores, int64_t k);

enum class PoolKind { None, Max, Avg };
PoolKind pool_kind_from_name(const std::string& name);  // "none", "max", "avg"

// Stride 1, padding kernel/2, odd kernel; avg divides by the kernel (zero padding counts, as
// torch's avg_pool1d). kernel <= 1 or PoolKind::None leaves the scores unchanged.
std::vector<float> pool1d(std::span<const float> scores, int kernel, PoolKind kind);

// Keeps the last `window` of n tokens plus the top (budget - window) of the scored prefix
// [0, n - window) (prefix_scores has n - window entries). budget <= window keeps the last
// budget tokens; budget >= n keeps everything (docs/methods.md, "Rules every method shares":
// a window larger than the budget).
std::vector<int32_t> window_plus_top(std::span<const float> prefix_scores, int64_t n, int64_t window, int64_t budget);

// Decode-time eviction of one token: fills `keep` with every index of `scores` except the
// lowest-scored among the first `candidates` (ties: the higher index goes, as top-k keeps the
// lower one). `keep` is reused, so a decode step allocates nothing once it has grown.
void all_but_lowest(std::span<const float> scores, int64_t candidates, std::vector<int32_t>& keep);

// 0, 1, ..., n-1.
std::vector<int32_t> all_indices(int64_t n);

}  // namespace kvslim
