// kvslim demo's table: pooling of runs per (method, budget), checked against values computed by
// hand from three made-up records.
#include <gtest/gtest.h>

#include "eval/demo_table.h"

namespace kvslim::eval {
namespace {

SampleRecord record(const std::string& method, int64_t budget, double score, uint64_t kv, int64_t n_prompt,
                    double prefill_ms, int64_t steps, double decode_ms) {
  SampleRecord r;
  r.method = method;
  r.budget = budget;
  r.score = score;
  r.kv_bytes = kv;
  r.n_prompt = n_prompt;
  r.prefill_ms = prefill_ms;
  r.decode_steps = steps;
  r.decode_ms = decode_ms;
  return r;
}

TEST(DemoTable, PoolsRunsPerMethodAndBudgetWithFullFirst) {
  const std::vector<SampleRecord> records = {
      record("snapkv", 64, 1.0, 100, 1000, 500, 10, 100),
      record("full", 0, 1.0, 400, 1000, 400, 10, 200),
      record("snapkv", 64, 0.5, 300, 3000, 1500, 30, 200),
  };
  const std::vector<DemoRow> rows = demo_rows(records);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].method, "full");
  EXPECT_EQ(rows[0].runs, 1);
  EXPECT_DOUBLE_EQ(rows[0].prefill_tok_s, 2500.0);  // 1000 tokens in 0.4 s
  EXPECT_DOUBLE_EQ(rows[0].decode_tok_s, 50.0);     // 10 steps in 0.2 s
  EXPECT_EQ(rows[1].method, "snapkv");
  EXPECT_EQ(rows[1].budget, 64);
  EXPECT_EQ(rows[1].runs, 2);
  EXPECT_DOUBLE_EQ(rows[1].score, 0.75);
  EXPECT_DOUBLE_EQ(rows[1].kv_bytes, 200.0);
  EXPECT_DOUBLE_EQ(rows[1].prefill_tok_s, 2000.0);  // 4000 tokens in 2 s (pooled, not a mean of rates)
  EXPECT_DOUBLE_EQ(rows[1].decode_tok_s, 40.0 / 0.3);

  const std::string table = demo_markdown(rows);
  EXPECT_NE(table.find("| full | - | 1 | 1.000 |"), std::string::npos) << table;
  EXPECT_NE(table.find("| snapkv | 64 | 2 | 0.750 | 0.00 | 50% | 2000 | 133.3 |"), std::string::npos) << table;
}

TEST(DemoTable, NoDecodeStepsGiveZeroSpeedNotNaN) {
  const std::vector<DemoRow> rows = demo_rows({record("knorm", 8, 0, 10, 100, 10, 0, 0)});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].decode_tok_s, 0.0);
  EXPECT_NE(demo_markdown(rows).find("| knorm | 8 | 1 | 0.000 | 0.00 | - |"), std::string::npos);
}

}  // namespace
}  // namespace kvslim::eval
