// Storage and traffic in token-equivalents per (layer, KV head) (issue 14 item 2): RocketKV's
// report follows its plan on the cache it actually kept (pages over the stage-1 tokens: min and
// max of K per page, one token-equivalent each; r of 2*head_dim floats per page read, plus k
// tokens read exactly), within its traffic budget; an eviction method stores and reads what it
// keeps; sparse attention without a report has none; the eval summary carries both columns.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/session.h"
#include "eval/summary.h"
#include "model/model.h"
#include "press/registry.h"
#include "press/methods/rocketkv_plan.h"
#include "test_models.h"

namespace kvslim {
namespace {

constexpr int64_t kPrompt = 300, kBudget = 40;
constexpr int kPredict = 8;

struct PrefillRun {
  std::optional<TokenCost> cost;
  std::vector<int64_t> sizes;  // per (layer, KV head) after prefill
  int head_dim = 0;
};

PrefillRun prefill(const Model& model, const std::string& method) {
  ThreadPool pool(2);
  EngineOptions options;
  const auto press = make_press(method, {});
  Session session(model, pool,
                  {.engine = options,
                   .capacity = kPrompt + kPredict,
                   .press = press.get(),
                   .budget = kBudget,
                   .n_predict = kPredict,
                   .seed = 1});
  std::vector<int32_t> prompt(kPrompt);
  for (int64_t i = 0; i < kPrompt; ++i) prompt[i] = int32_t(3 + (i * 37 + 11) % 200);
  session.prefill(prompt);
  PrefillRun r{session.token_cost(), {}, model.config().head_dim};
  for (int l = 0; l < session.kv().n_layers(); ++l)
    for (int h = 0; h < session.kv().n_kv_heads(); ++h) r.sizes.push_back(session.kv().head(l, h).size());
  return r;
}

TEST(TokenCost, RocketKvReportsItsPagesAndReadsWithinItsBudget) {
  const auto model = Model::load(testing::make_model({}));
  const PrefillRun r = prefill(*model, "rocketkv");
  ASSERT_TRUE(r.cost.has_value());
  const RocketKvPlan plan = rocketkv_plan(kPrompt, kPredict, kBudget, r.head_dim, RocketKvSplit::Released);
  double storage = 0, traffic = 0;
  for (int64_t n : r.sizes) {
    EXPECT_EQ(n, plan.prompt_budget);  // stage 1 kept P tokens per head
    const double pages = std::ceil(double(n) / plan.page);
    storage += (double(n) + pages) / double(r.sizes.size());
    traffic += (pages * plan.channels / (2.0 * r.head_dim) + double(std::min<int64_t>(plan.top_k, n))) /
               double(r.sizes.size());
  }
  EXPECT_NEAR(r.cost->storage, storage, 1e-9);
  EXPECT_NEAR(r.cost->traffic, traffic, 1e-9);
  EXPECT_LE(r.cost->traffic, double(kBudget)) << "a decode step reads more than the traffic budget";
  EXPECT_GT(r.cost->storage, r.cost->traffic) << "RocketKV stores more than it reads per step";
}

TEST(TokenCost, EvictionStoresAndReadsWhatItKeepsAndSparseAttentionHasNoReport) {
  const auto model = Model::load(testing::make_model({}));
  const PrefillRun snap = prefill(*model, "snapkv");
  ASSERT_TRUE(snap.cost.has_value());
  EXPECT_DOUBLE_EQ(snap.cost->storage, double(kBudget));
  EXPECT_DOUBLE_EQ(snap.cost->traffic, double(kBudget));
  const PrefillRun full = prefill(*model, "full");
  ASSERT_TRUE(full.cost.has_value());
  EXPECT_DOUBLE_EQ(full.cost->storage, double(kPrompt));
  EXPECT_FALSE(prefill(*model, "quest").cost.has_value());
}

TEST(TokenCost, TheEvalSummaryCarriesBothColumns) {
  eval::SampleRecord a;
  a.method = "rocketkv";
  a.budget = 40;
  a.task = "passkey";
  a.length = 1024;
  a.protocol = "query-aware";
  a.storage_tokens = 30;
  a.traffic_tokens = 20;
  eval::SampleRecord b = a;
  b.seed = 1;
  b.storage_tokens = 34;
  b.traffic_tokens = 22;
  const eval::Summary s = eval::summarize({a, b});
  ASSERT_EQ(s.rows.size(), 1u);
  EXPECT_DOUBLE_EQ(*s.rows[0].storage_tokens, 32);
  EXPECT_DOUBLE_EQ(*s.rows[0].traffic_tokens, 21);
  const std::string csv = eval::summary_csv(s);
  EXPECT_EQ(
      csv.substr(0, csv.find('\n')),
      "method,budget,task,length,samples,score,kv_bytes,prefill_ms,score_ms,decode_ms,storage_tokens,traffic_tokens");
  // A record written before the fields existed still reads.
  nlohmann::json old = eval::to_json(a);
  old.erase("storage_tokens");
  old.erase("traffic_tokens");
  EXPECT_FALSE(eval::record_from_json(old).storage_tokens.has_value());
}

}  // namespace
}  // namespace kvslim
