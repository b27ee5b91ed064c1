// The selection helpers of decode-time sparse attention (press/sparse_attention.h) against naive
// references written here: top_k_with_newest (a value threshold and one ascending pass) against
// an index sort with the stated tie rule, on random scores with many ties; kth_largest against a
// sort.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>
#include <random>

#include "press/sparse_attention.h"

namespace kvslim {
namespace {

// The specification read literally: force the last index, order all indices by score
// descending with ties to the lower index, keep the first k, sort ascending.
std::vector<int32_t> top_k_newest_naive(std::vector<float> scores, int64_t k) {
  scores.back() = std::numeric_limits<float>::infinity();
  std::vector<int32_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return scores[a] > scores[b] || (scores[a] == scores[b] && a < b); });
  order.resize(size_t(std::clamp<int64_t>(k, 0, int64_t(order.size()))));
  std::sort(order.begin(), order.end());
  return order;
}

TEST(SparseSelection, TopKWithNewestMatchesTheNaiveOrderingWithTies) {
  std::mt19937 rng(13);
  std::vector<uint32_t> work;
  std::vector<int32_t> out;
  int cases = 0;
  for (int64_t n : {1, 2, 3, 15, 16, 17, 33, 100, 257, 1000, 4099}) {
    for (int levels : {1, 2, 5, 50, 0}) {  // 0: continuous values (no ties)
      std::uniform_int_distribution<int> level(0, std::max(levels, 1) - 1);
      std::uniform_real_distribution<float> real(-1.0f, 1.0f);
      std::vector<float> scores(static_cast<size_t>(n));
      for (float& s : scores) s = levels > 0 ? float(level(rng)) * 0.25f : real(rng);
      if (n > 4) scores[size_t(n / 2)] = std::numeric_limits<float>::infinity();  // a tie with the newest
      for (int64_t k : {int64_t(1), int64_t(2), n / 3, n / 2, n - 1, n, n + 5}) {
        if (k < 1) continue;
        std::vector<float> input = scores;
        top_k_with_newest(input, k, work, out);
        ASSERT_EQ(out, top_k_newest_naive(scores, k)) << "n=" << n << " levels=" << levels << " k=" << k;
        ++cases;
      }
    }
  }
  EXPECT_GT(cases, 300);
}

TEST(SparseSelection, TopKWithNewestTakesTiesAtTheThresholdByLowestIndex) {
  // Scores 3 2 2 2 2 1 (newest forced to +inf): k = 4 takes the newest, the 3, and the two
  // lowest-indexed of the four 2s.
  std::vector<float> scores{3, 2, 2, 2, 2, 1};
  std::vector<uint32_t> work;
  std::vector<int32_t> out;
  top_k_with_newest(scores, 4, work, out);
  EXPECT_EQ(out, (std::vector<int32_t>{0, 1, 2, 5}));
}

TEST(SparseSelection, KthLargestMatchesASortAcrossSignsZerosAndInfinities) {
  std::mt19937 rng(7);
  std::vector<uint32_t> keys;
  const float specials[] = {0.0f,
                            -0.0f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::denorm_min(),
                            -std::numeric_limits<float>::max(),
                            1e-30f,
                            -1e-30f};
  for (int trial = 0; trial < 40; ++trial) {
    const int n = 1 + int(rng() % 3000);
    std::vector<float> values(static_cast<size_t>(n));
    std::uniform_real_distribution<float> wide(-1e6f, 1e6f);
    for (float& v : values) {
      const uint32_t pick = rng() % 10;
      v = pick < 3 ? specials[rng() % 8] : pick < 6 ? float(int(rng() % 7) - 3) : wide(rng);
    }
    std::vector<float> sorted = values;
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    for (int64_t k : {int64_t(1), int64_t(n / 2 + 1), int64_t(n)}) {
      const float got = kth_largest(values, k, keys);
      // -0 and +0 are the same value to every comparison the selection makes.
      ASSERT_TRUE(got == sorted[size_t(k - 1)]) << "n=" << n << " k=" << k << " got " << got;
    }
  }
}

}  // namespace
}  // namespace kvslim
