// Selection and pooling shared by every method, on hand-computed cases (docs/methods.md, "Rules
// every method shares": top-k, pooling, a window larger than the budget).
#include <gtest/gtest.h>

#include "press/select.h"
#include "util/error.h"

namespace kvslim {
namespace {

using Ids = std::vector<int32_t>;

TEST(PressSelect, TopKReturnsAscendingIndicesAndTheLowerIndexWinsTies) {
  const std::vector<float> s = {0.5f, 2.0f, 1.0f, 2.0f, 1.0f, -3.0f};
  EXPECT_EQ(top_k_ascending(s, 2), (Ids{1, 3}));
  EXPECT_EQ(top_k_ascending(s, 3), (Ids{1, 2, 3}));  // 1.0 at 2 and 4: index 2 wins
  EXPECT_EQ(top_k_ascending(s, 0), Ids{});
  EXPECT_EQ(top_k_ascending(s, 9), (Ids{0, 1, 2, 3, 4, 5}));
}

TEST(PressSelect, MaxPoolingWithKernelThree) {
  // padding 1: out[i] = max(s[i-1], s[i], s[i+1]) over the existing neighbours.
  const std::vector<float> s = {1, 5, 2, 0, 0, 3};
  EXPECT_EQ(pool1d(s, 3, PoolKind::Max), (std::vector<float>{5, 5, 5, 2, 3, 3}));
}

TEST(PressSelect, AvgPoolingCountsTheZeroPadding) {
  // kernel 3 divides by 3 even at the edges (torch's avg_pool1d with count_include_pad).
  const std::vector<float> s = {3, 6, 9};
  EXPECT_EQ(pool1d(s, 3, PoolKind::Avg), (std::vector<float>{3, 6, 5}));
}

TEST(PressSelect, NoPoolingOrKernelOneLeavesScoresAlone) {
  const std::vector<float> s = {1, 5, 2};
  EXPECT_EQ(pool1d(s, 7, PoolKind::None), s);
  EXPECT_EQ(pool1d(s, 1, PoolKind::Max), s);
}

TEST(PressSelect, WindowPlusTopKeepsTheWindowAndTheBestOfThePrefix) {
  // n = 8, window 3 (tokens 5, 6, 7), budget 5: the 2 best of the prefix [0, 5).
  const std::vector<float> prefix = {0.1f, 0.9f, 0.3f, 0.8f, 0.2f};
  EXPECT_EQ(window_plus_top(prefix, 8, 3, 5), (Ids{1, 3, 5, 6, 7}));
}

TEST(PressSelect, SmallCasesFollowTheSpecification) {
  const std::vector<float> prefix = {0.1f, 0.9f, 0.3f, 0.8f, 0.2f};
  EXPECT_EQ(window_plus_top(prefix, 8, 3, 2), (Ids{6, 7}));                    // B <= w: the last B
  EXPECT_EQ(window_plus_top(prefix, 8, 3, 8), (Ids{0, 1, 2, 3, 4, 5, 6, 7}));  // B >= n: all
  EXPECT_EQ(window_plus_top({}, 2, 3, 1), (Ids{1}));                           // window min(w, n)
}

TEST(PressSelect, UnknownPoolingIsNamed) { EXPECT_THROW(pool_kind_from_name("mean"), Error); }

}  // namespace
}  // namespace kvslim

namespace kvslim {
namespace {

TEST(PressSelect, AllButLowestEvictsTheLowestCandidateAndTheHigherIndexOnTies) {
  std::vector<int32_t> keep;
  all_but_lowest(std::vector<float>{3, 1, 2, 1, 0}, 4, keep);  // 0 at index 4 is not a candidate
  EXPECT_EQ(keep, (std::vector<int32_t>{0, 1, 2, 4}));         // tie at 1: index 3 goes
}

}  // namespace
}  // namespace kvslim
