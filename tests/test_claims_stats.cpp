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
      rec("keydiff", 32, 0, 1),  rec("snapkv", 32, 0, 0),  rec("keydiff", 32, 1, 1),
      rec("snapkv", 32, 1, 0.5), rec("keydiff", 32, 2, 1),  // no snapkv partner: left out
      rec("snapkv", 64, 0, 1),                              // another budget
  };
  EXPECT_EQ(paired_differences(records, "keydiff", "snapkv", 32, "score"), (std::vector<double>{1.0, 0.5}));
  EXPECT_TRUE(paired_differences(records, "keydiff", "snapkv", 64, "score").empty());

  // Through the table: block-wise keydiff beats block-wise snapkv on every one of 4 samples by 1:
  // [1, 1], agrees. The peak KV figures are the largest over the samples (snapkv's 3 MiB at seed 2,
  // keydiff's 1 MiB), and the end-of-prefill snapkv's from the query-aware sweep (6 MiB).
  ClaimsPlan plan = claims_plan(true, "");
  plan.budgets = {32};
  ClaimsRecords sweeps;
  for (uint64_t s = 0; s < 4; ++s) {
    sweeps.block.push_back(rec("keydiff:block=128", 32, s, 1));
    sweeps.block.back().kv_bytes_peak = 1 << 20;
    sweeps.block.push_back(rec("snapkv:prefill=block", 32, s, 0));
    sweeps.block.back().kv_bytes_peak = (s == 2 ? 3 : 1) << 20;
    sweeps.aware.push_back(rec("snapkv", 32, s, 0));
    sweeps.aware.back().kv_bytes_peak = 6 << 20;
  }
  sweeps.aware.push_back(rec("keydiff", 32, 0, 0));  // end-of-prefill records are not KeyDiff's setting
  bool found = false;
  for (const ClaimRow& row : claim_rows(plan, sweeps))
    if (row.paper == "KeyDiff" && row.claim.find("above snapkv") == 0) {
      found = true;
      EXPECT_EQ(row.verdict, "agrees");
      EXPECT_EQ(row.interval, "+1.000 [+1.000, +1.000]");
      EXPECT_EQ(row.figures, "keydiff 1.000 vs snapkv 0.000 (n=4); peak KV 1.00 vs 3.00 (6.00)");
    }
  EXPECT_TRUE(found);
}

// KeyDiff's setting: every method of its sweep evicts after each prefill block of one size, the
// engine's block included, and compares against each baseline the claim names.
TEST(ClaimsStats, KeyDiffsSweepIsBlockWiseForEveryMethod) {
  const ClaimsPlan plan = claims_plan(true, "");
  bool seen = false;
  for (const ClaimsSweep& s : claims_sweeps(plan, "unused-out")) {
    if (s.dir != "block-prefill") continue;
    seen = true;
    EXPECT_EQ(s.options.runner.engine.batch, plan.block);
    std::vector<std::string> labels;
    for (const MethodSpec& m : s.options.methods) labels.push_back(m.label);
    EXPECT_EQ(labels, (std::vector<std::string>{"keydiff:block=128", "snapkv:prefill=block", "tova:prefill=block",
                                                "h2o:prefill=block", "streaming_llm:prefill=block"}));
  }
  EXPECT_TRUE(seen);
}

SampleRecord turn(const std::string& method, uint64_t seed, int n, double score, uint64_t peak) {
  SampleRecord r = rec(method, 64, seed, score);
  r.task = "niah_multiquery/turn" + std::to_string(n);
  r.kv_bytes_peak = peak;
  r.kv_bytes = peak / 2;
  return r;
}

TEST(ClaimsStats, MultiTurnSamplesAreFoldedIntoTheirLaterTurnsMean) {
  const std::vector<SampleRecord> records = {
      turn("rocketkv:mt=true", 0, 1, 1, 10), turn("rocketkv:mt=true", 0, 2, 1, 20),
      turn("rocketkv:mt=true", 0, 3, 0, 30), turn("rocketkv:mt=true", 0, 4, 1, 25),
      turn("rocketkv:mt=true", 1, 2, 0, 5),  turn("snapkv", 0, 2, 0, 1),
  };
  const std::vector<SampleRecord> folded = mean_over_turns(records, 2);
  ASSERT_EQ(folded.size(), 3u);
  // Seed 0: turns 2-4 score 1, 0, 1 (turn 1 left out): 2/3; its largest peak is turn 3's.
  EXPECT_EQ(folded[0].method, "rocketkv:mt=true");
  EXPECT_EQ(folded[0].task, "niah_multiquery");
  EXPECT_NEAR(folded[0].score, 2.0 / 3.0, 1e-12);
  EXPECT_EQ(folded[0].kv_bytes_peak, 30u);
  EXPECT_EQ(folded[0].kv_bytes, 15u);
  EXPECT_EQ(folded[1].seed, 1u);
  EXPECT_EQ(folded[1].score, 0);
  EXPECT_EQ(folded[2].method, "snapkv");
  // From turn 1, seed 0 averages all four turns: 3/4.
  EXPECT_NEAR(mean_over_turns(records, 1)[0].score, 0.75, 1e-12);
}

TEST(ClaimsStats, RocketKvMtRowsPairOneMeanPerSample) {
  // 4 samples x 3 later turns: rocketkv-mt's per-sample means 1, 2/3, 1, 1/3; exact_topk's 1, 1, 1, 0.
  // Differences 0, -1/3, 0, 1/3: mean 0, sd sqrt((2/9) / 3) = 0.272166, half width
  // 3.182 * 0.272166 / 2 = 0.43302: [-0.433, +0.433], not within ±0.05 and not wholly outside it:
  // inconclusive, over n=4 pairs (not 12 turns).
  ClaimsPlan plan = claims_plan(true, "");
  plan.budgets = {64};
  const double mt[4][3] = {{1, 1, 1}, {1, 0, 1}, {1, 1, 1}, {0, 1, 0}};
  const double topk[4][3] = {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}};
  ClaimsRecords records;
  for (uint64_t s = 0; s < 4; ++s) {
    records.multi_turn.push_back(turn("rocketkv:mt=true", s, 1, 0, 1 << 20));  // turn 1: not a later turn
    records.multi_turn.push_back(turn("exact_topk", s, 1, 1, 1 << 20));
    for (int t = 0; t < 3; ++t) {
      records.multi_turn.push_back(turn("rocketkv:mt=true", s, t + 2, mt[s][t], 2 << 20));
      records.multi_turn.push_back(turn("exact_topk", s, t + 2, topk[s][t], 2 << 20));
    }
  }
  records.multi_turn.push_back(turn("exact_topk", 99, 2, 0, 0));  // a seed outside the plan: left out
  bool found = false;
  for (const ClaimRow& row : claim_rows(plan, records))
    if (row.claim.find("RocketKV-MT close to Exact-TopK") == 0) {
      found = true;
      EXPECT_EQ(row.figures, "rocketkv-mt 0.750 vs exact_topk 0.750 (n=4); KV kept 1.00 vs 1.00");
      EXPECT_EQ(row.interval, "+0.000 [-0.433, +0.433]");
      EXPECT_EQ(row.verdict, "inconclusive");
    }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace kvslim::eval
