// Intrinsic metrics: the formulas against hand-computed values; the oracle set against a naive
// recomputation from every attention row; with `full` as the method error 0, KL 0, perplexity
// ratio 1 and recall 1; a press keeping exactly the oracle set has recall 1, one keeping none
// of it recall 0.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <numeric>

#include "eval/intrinsic.h"
#include "eval/intrinsic_math.h"
#include "eval/oracle.h"
#include "model/model.h"
#include "press/registry.h"
#include "test_models.h"

namespace kvslim {
namespace {

using eval::FullReference;
using eval::IntrinsicOptions;
using eval::PromptTokens;

TEST(IntrinsicMath, LogSoftmaxOfTwoLogits) {
  // softmax(0, ln 3) = (1/4, 3/4)
  const std::vector<double> l = eval::log_softmax(std::vector<float>{0.0f, float(std::log(3.0))});
  EXPECT_NEAR(l[0], std::log(0.25), 1e-7);
  EXPECT_NEAR(l[1], std::log(0.75), 1e-7);
}

TEST(IntrinsicMath, KlOfAHandComputedPair) {
  // p = (1/2, 1/4, 1/4), q = (1/4, 1/2, 1/4) given as shifted logits:
  // KL(p||q) = 1/2 ln 2 + 1/4 ln(1/2) + 0 = ln(2) / 4.
  const auto p = eval::log_softmax(
      std::vector<float>{float(std::log(0.5)) + 3, float(std::log(0.25)) + 3, float(std::log(0.25)) + 3});
  const auto q = eval::log_softmax(
      std::vector<float>{float(std::log(0.25)) - 1, float(std::log(0.5)) - 1, float(std::log(0.25)) - 1});
  EXPECT_NEAR(eval::kl_divergence(p, q), std::log(2.0) / 4, 1e-7);
  EXPECT_EQ(eval::kl_divergence(p, p), 0.0);
}

TEST(IntrinsicMath, RelativeL2ErrorOfAHandComputedPair) {
  // a - ref = (0, 2, 0): ||.|| = 2; ||ref|| = sqrt(1 + 4) = sqrt(5).
  EXPECT_NEAR(eval::relative_l2_error(std::vector<float>{1, 2, 2}, std::vector<float>{1, 0, 2}), 2 / std::sqrt(5.0),
              1e-12);
  EXPECT_EQ(eval::relative_l2_error(std::vector<float>{0, 0}, std::vector<float>{0, 0}), 0.0);
  EXPECT_TRUE(std::isinf(eval::relative_l2_error(std::vector<float>{1, 0}, std::vector<float>{0, 0})));
}

TEST(IntrinsicMath, RecallCountsTheOracleFound) {
  EXPECT_DOUBLE_EQ(eval::recall(std::vector<int64_t>{1, 3, 5, 7}, std::vector<int64_t>{3, 4, 7}), 2.0 / 3);
  EXPECT_DOUBLE_EQ(eval::recall(std::vector<int64_t>{}, std::vector<int64_t>{0}), 0.0);
  EXPECT_DOUBLE_EQ(eval::recall(std::vector<int64_t>{2}, std::vector<int64_t>{}), 1.0);
}

struct Fixture {
  std::unique_ptr<Model> model = Model::load(testing::make_model(testing::TinyModel{}));
  ThreadPool pool{2};
  EngineOptions engine;
  PromptTokens prompt;
  Fixture(int n_context, int n_question) {
    engine.page_tokens = 8;
    for (int i = 0; i < n_context + n_question; ++i) {
      const int32_t id = 3 + (i * 29 + 5) % (model->config().n_vocab - 3);
      (i < n_context ? prompt.compressed : prompt.appended).push_back(id);
    }
  }
  const ModelConfig& config() const { return model->config(); }
};

std::function<std::unique_ptr<Press>()> method(const std::string& name) {
  return [name] { return make_press(name, {}); };
}

// Every decode row of every query head, kept whole, for the naive oracle below.
class RowRecorder final : public Press, public AttentionProbe {
 public:
  AttentionProbe* decode_probe() override { return this; }
  // Rows of different query heads arrive concurrently (AttentionProbe's contract).
  void on_row(int layer, int q_head, int64_t, const float* probs, int64_t n_visible) override {
    std::lock_guard<std::mutex> lock(mutex_);
    rows.push_back({layer, q_head, std::vector<double>(probs, probs + n_visible)});
  }
  struct Row {
    int layer, q_head;
    std::vector<double> probs;
  };
  std::vector<Row> rows;

 private:
  std::mutex mutex_;
};

TEST(Oracle, IsTheTopBOfTheMeanResponseAttention) {
  Fixture f(40, 0);
  IntrinsicOptions options;
  options.recall = true;
  options.response_tokens = 6;
  const FullReference ref = eval::run_full_reference(*f.model, f.pool, f.engine, f.prompt, options);
  const int64_t budget = 10;
  const eval::OracleSets oracle =
      eval::oracle_sets(ref.response_attention, f.config().n_layers, f.config().n_kv_heads, budget);

  // Naive: replay the same greedy response with a recorder, average every row over the prompt
  // positions per KV head, sort by (mean desc, position asc).
  RowRecorder recorder;
  Session session(*f.model, f.pool, {.engine = f.engine, .capacity = 46, .press = &recorder, .n_predict = 6});
  session.prefill(f.prompt.compressed);
  for (int32_t token : ref.response) session.decode(token);
  const int group = f.config().group_size();
  for (int l = 0; l < f.config().n_layers; ++l)
    for (int h = 0; h < f.config().n_kv_heads; ++h) {
      std::vector<double> mean(40, 0.0);
      int n_rows = 0;
      for (const auto& row : recorder.rows)
        if (row.layer == l && row.q_head / group == h) {
          for (int j = 0; j < 40; ++j) mean[j] += row.probs[j];
          ++n_rows;
        }
      ASSERT_EQ(n_rows, 6 * group);
      std::vector<int64_t> order(40);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return mean[a] > mean[b]; });
      std::vector<int64_t> expected(order.begin(), order.begin() + budget);
      std::sort(expected.begin(), expected.end());
      EXPECT_EQ(oracle[size_t(l) * f.config().n_kv_heads + h], expected) << "layer " << l << " head " << h;
    }
}

// Keeps, at the end of prefill, exactly the given positions of each (layer, KV head) (the
// cache is still whole then, so positions are cache indices).
class KeepPositions final : public Press {
 public:
  explicit KeepPositions(eval::OracleSets sets) : sets_(std::move(sets)) {}
  void end_prefill(PressContext& ctx) override {
    for (int l = 0; l < ctx.cache().n_layers(); ++l)
      for (int h = 0; h < ctx.cache().n_kv_heads(); ++h) {
        const auto& s = sets_[size_t(l) * ctx.cache().n_kv_heads() + h];
        ctx.keep(l, h, std::vector<int32_t>(s.begin(), s.end()));
      }
  }

 private:
  eval::OracleSets sets_;
};

TEST(Oracle, KeepingExactlyTheOracleSetHasRecallOneAndKeepingNoneOfItZero) {
  Fixture f(48, 5);  // query-agnostic: the oracle ranks the 48 context positions
  IntrinsicOptions options;
  options.recall = true;
  options.response_tokens = 8;
  const FullReference ref = eval::run_full_reference(*f.model, f.pool, f.engine, f.prompt, options);
  const int64_t budget = 12;
  const eval::OracleSets oracle =
      eval::oracle_sets(ref.response_attention, f.config().n_layers, f.config().n_kv_heads, budget);
  eval::OracleSets complement;
  for (const auto& set : oracle) {
    std::vector<int64_t> outside;
    for (int64_t p = 0; p < 48 && int64_t(outside.size()) < budget; ++p)
      if (!std::binary_search(set.begin(), set.end(), p)) outside.push_back(p);
    complement.push_back(outside);
  }
  const auto keep_oracle = [&] { return std::make_unique<KeepPositions>(oracle); };
  const auto keep_complement = [&] { return std::make_unique<KeepPositions>(complement); };
  EXPECT_EQ(*eval::measure_intrinsic(*f.model, f.pool, f.engine, f.prompt, ref, keep_oracle, budget, 0, options).recall,
            1.0);
  EXPECT_EQ(
      *eval::measure_intrinsic(*f.model, f.pool, f.engine, f.prompt, ref, keep_complement, budget, 0, options).recall,
      0.0);
}

IntrinsicOptions all_metrics(int n) {
  IntrinsicOptions options;
  options.recall = options.attn_error = options.kl = true;
  options.response_tokens = n;
  return options;
}

TEST(Intrinsic, FullIsExactUnderBothProtocols) {
  for (int n_question : {0, 6}) {
    Fixture f(30, n_question);
    const IntrinsicOptions options = all_metrics(5);
    const FullReference ref = eval::run_full_reference(*f.model, f.pool, f.engine, f.prompt, options);
    EXPECT_EQ(ref.response.size(), 5u);
    for (int64_t budget : {kNoBudget, int64_t(8)}) {  // `full` ignores a budget
      const auto r =
          eval::measure_intrinsic(*f.model, f.pool, f.engine, f.prompt, ref, method("full"), budget, 0, options);
      EXPECT_EQ(*r.recall, 1.0);
      EXPECT_EQ(*r.attn_error, 0.0);
      EXPECT_EQ(*r.kl, 0.0);
      EXPECT_EQ(*r.ppl_ratio, 1.0);
    }
  }
}

TEST(Intrinsic, EvictionShowsInEveryMetric) {
  Fixture f(60, 0);
  const IntrinsicOptions options = all_metrics(6);
  const FullReference ref = eval::run_full_reference(*f.model, f.pool, f.engine, f.prompt, options);
  const auto r =
      eval::measure_intrinsic(*f.model, f.pool, f.engine, f.prompt, ref, method("streaming_llm"), 8, 0, options);
  EXPECT_GT(*r.attn_error, 0.0);
  EXPECT_GT(*r.kl, 0.0);
  EXPECT_GT(*r.ppl_ratio, 0.0);
  // StreamingLLM keeps the 4 sinks and the last 4 positions of every head.
  const eval::OracleSets oracle =
      eval::oracle_sets(ref.response_attention, f.config().n_layers, f.config().n_kv_heads, 8);
  double expected = 0;
  for (const auto& set : oracle)
    expected += double(std::count_if(set.begin(), set.end(), [](int64_t p) { return p < 4 || p >= 56; })) / 8;
  EXPECT_DOUBLE_EQ(*r.recall, expected / double(oracle.size()));
}

TEST(Intrinsic, KlCanFollowAGivenContinuation) {
  Fixture f(30, 0);
  IntrinsicOptions options;
  options.kl = true;
  options.continuation = {7, 9, 11, 13};
  const FullReference ref = eval::run_full_reference(*f.model, f.pool, f.engine, f.prompt, options);
  EXPECT_EQ(ref.forced, options.continuation);
  EXPECT_EQ(ref.logits.size(), 4u * f.config().n_vocab);
  const auto full =
      eval::measure_intrinsic(*f.model, f.pool, f.engine, f.prompt, ref, method("full"), kNoBudget, 0, options);
  EXPECT_EQ(*full.kl, 0.0);
  EXPECT_EQ(*full.ppl_ratio, 1.0);
  EXPECT_FALSE(full.recall.has_value());
  EXPECT_FALSE(full.attn_error.has_value());
  const auto knorm = eval::measure_intrinsic(*f.model, f.pool, f.engine, f.prompt, ref, method("knorm"), 6, 0, options);
  EXPECT_GT(*knorm.kl, 0.0);
}

}  // namespace
}  // namespace kvslim
