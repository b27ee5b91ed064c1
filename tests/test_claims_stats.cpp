// `kvslim claims`' statistics against hand-computed cases: the Student t quantile, the paired 95%
// interval, the verdicts at their boundaries, and the pairing of records by sample.
#include <gtest/gtest.h>

#include <cmath>

#include "eval/claims.h"
#include "eval/claims_stats.h"

namespace kvslim::eval {
namespace {

TEST(ClaimsStats, StudentQuantileFromTheTableAndBetweenItsEntries) {
  EXPECT_DOUBLE_EQ(student_t_975(1), 12.706);
  EXPECT_DOUBLE_EQ(student_t_975(5), 2.571);
  EXPECT_DOUBLE_EQ(student_t_975(30), 2.042);
  // 45 lies a third of the way from 1/40 to 1/60: 2.021 - 0.021/3.
  EXPECT_NEAR(student_t_975(45), 2.014, 1e-9);
  EXPECT_NEAR(student_t_975(1000000), 1.960, 1e-4);
}

TEST(ClaimsStats, PairedIntervalByHand) {
  // mean 0.3, squared deviations 0.01+0.01+0+0.04+0.04+0 = 0.1, sd = sqrt(0.1/5), se = sd/sqrt(6),
  // half width 2.571 * se = 0.148437.
  const std::vector<double> d = {0.2, 0.4, 0.3, 0.5, 0.1, 0.3};
  const PairedInterval ci = paired_interval(d);
  EXPECT_EQ(ci.n, 6);
  EXPECT_NEAR(ci.mean, 0.3, 1e-12);
  EXPECT_NEAR(ci.lo, 0.3 - 0.148437, 1e-6);
  EXPECT_NEAR(ci.hi, 0.3 + 0.148437, 1e-6);
  EXPECT_EQ(verdict_above(ci), Verdict::Agrees);
  EXPECT_EQ(format_interval(ci), "+0.300 [+0.152, +0.448]");

  std::vector<double> neg(d.size());
  for (size_t i = 0; i < d.size(); ++i) neg[i] = -d[i];
  EXPECT_EQ(verdict_above(paired_interval(neg)), Verdict::Disagrees);
}

TEST(ClaimsStats, AnIntervalHoldingZeroIsInconclusive) {
  // 0/1 scores: mean 0.75, sd 0.5, se 0.25, half width 3.182 * 0.25 = 0.7955: [-0.0455, 1.5455].
  const PairedInterval ci = paired_interval(std::vector<double>{1, 0, 1, 1});
  EXPECT_NEAR(ci.lo, -0.0455, 1e-9);
  EXPECT_NEAR(ci.hi, 1.5455, 1e-9);
  EXPECT_EQ(verdict_above(ci), Verdict::Inconclusive);
  // Every sample tied (both methods at the ceiling): [0, 0], the setting does not separate them.
  const PairedInterval ties = paired_interval(std::vector<double>{0, 0, 0});
  EXPECT_EQ(ties.lo, 0);
  EXPECT_EQ(ties.hi, 0);
  EXPECT_EQ(verdict_above(ties), Verdict::Inconclusive);
  // One pair has no interval.
  const PairedInterval one = paired_interval(std::vector<double>{1});
  EXPECT_TRUE(std::isinf(one.lo) && std::isinf(one.hi));
  EXPECT_EQ(verdict_above(one), Verdict::Inconclusive);
  EXPECT_EQ(verdict_close(one, 0.05), Verdict::Inconclusive);
}

TEST(ClaimsStats, CloseWithinAMargin) {
  // mean 0.005, ss 0.0005, sd sqrt(0.0005/3), half width 3.182 * sd / 2 = 0.02054: inside ±0.05.
  const PairedInterval close = paired_interval(std::vector<double>{0.01, -0.01, 0.02, 0.0});
  EXPECT_NEAR(close.hi, 0.005 + 0.0205397, 1e-6);
  EXPECT_EQ(verdict_close(close, 0.05), Verdict::Agrees);
  // mean 0.3, half width 3.182 * sqrt(0.02/3) / 2 = 0.12991: [0.170, 0.430], wholly above 0.05.
  const PairedInterval far = paired_interval(std::vector<double>{0.3, 0.4, 0.2, 0.3});
  EXPECT_NEAR(far.lo, 0.3 - 0.129904, 1e-5);
  EXPECT_EQ(verdict_close(far, 0.05), Verdict::Disagrees);
  // The same differences straddle the margin with a wider one: inconclusive.
  EXPECT_EQ(verdict_close(far, 0.2), Verdict::Inconclusive);
}

SampleRecord rec(const std::string& method, int64_t budget, uint64_t seed, double score) {
  SampleRecord r;
  r.method = method;
  r.budget = budget;
  r.task = "passkey";
  r.length = 1024;
  r.seed = seed;
  r.protocol = "query-aware";
  r.score = score;
  return r;
}

TEST(ClaimsStats, RecordsPairBySampleAtOneBudget) {
  const std::vector<SampleRecord> records = {
      rec("keydiff", 32, 0, 1), rec("snapkv", 32, 0, 0),  rec("keydiff", 32, 1, 1), rec("snapkv", 32, 1, 0.5),
      rec("keydiff", 32, 2, 1),                            // no snapkv partner: left out
      rec("snapkv", 64, 0, 1),                             // another budget
  };
  EXPECT_EQ(paired_differences(records, "keydiff", "snapkv", 32, "score"), (std::vector<double>{1.0, 0.5}));
  EXPECT_TRUE(paired_differences(records, "keydiff", "snapkv", 64, "score").empty());

  // Through the table: keydiff beats snapkv on every one of 4 samples by 1: [1, 1], agrees.
  ClaimsPlan plan = claims_plan(true, "");
  plan.budgets = {32};
  std::vector<SampleRecord> aware;
  for (uint64_t s = 0; s < 4; ++s) aware.push_back(rec("keydiff", 32, s, 1)), aware.push_back(rec("snapkv", 32, s, 0));
  bool found = false;
  for (const ClaimRow& row : claim_rows(plan, {}, aware, {}))
    if (row.paper == "KeyDiff" && row.claim.find("above snapkv") == 0) {
      found = true;
      EXPECT_EQ(row.verdict, "agrees");
      EXPECT_EQ(row.interval, "+1.000 [+1.000, +1.000]");
    }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace kvslim::eval
