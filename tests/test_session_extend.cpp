// Session::extend (the query-agnostic protocol's uncompressed question) and the attention-output
// hook: extending a `full` session is the same computation as prefilling the concatenation; the
// press sees none of the extension; the hook changes nothing and reports every layer.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/generate.h"
#include "engine/session.h"
#include "model/model.h"
#include "press/registry.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim {
namespace {

std::vector<int32_t> tokens(int n, int n_vocab, int salt = 0) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = 3 + (i * 37 + 11 + salt) % (n_vocab - 3);
  return t;
}

std::vector<float> copy(const float* logits, int n) { return std::vector<float>(logits, logits + n); }

double max_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, double(std::abs(a[i] - b[i])));
    scale = std::max(scale, double(std::abs(b[i])));
  }
  return err / scale;
}

struct Fixture {
  std::unique_ptr<Model> model = Model::load(testing::make_model(testing::TinyModel{}));
  ThreadPool pool{2};
  EngineOptions options;
  int n_vocab() const { return model->config().n_vocab; }
};

TEST(SessionExtend, FullPressExtendEqualsPrefillOfTheConcatenation) {
  Fixture f;
  f.options.batch = 8;  // several blocks on both sides, cut at different places
  const auto context = tokens(21, f.n_vocab()), question = tokens(13, f.n_vocab(), 5);
  std::vector<int32_t> whole = context;
  whole.insert(whole.end(), question.begin(), question.end());
  const int n_predict = 4;

  const auto full_a = make_press("full", {}), full_b = make_press("full", {});
  Session joined(*f.model, f.pool,
                 {.engine = f.options, .capacity = 40, .press = full_a.get(), .n_predict = n_predict});
  Session split(*f.model, f.pool, {.engine = f.options, .capacity = 40, .press = full_b.get(), .n_predict = n_predict});
  std::vector<float> a = copy(joined.prefill(whole), f.n_vocab());
  split.prefill(context);
  std::vector<float> b = copy(split.extend(question), f.n_vocab());
  EXPECT_EQ(split.n_past(), joined.n_past());
  for (int step = 0; step <= n_predict; ++step) {
    EXPECT_LT(max_relative_difference(b, a), 1e-5) << "step " << step;
    const int32_t next = int32_t(std::max_element(a.begin(), a.end()) - a.begin());
    a = copy(joined.decode(next), f.n_vocab());
    b = copy(split.decode(next), f.n_vocab());
  }
}

TEST(SessionExtend, ThePressNeitherSeesNorEvictsTheExtension) {
  Fixture f;
  const int64_t budget = 6;
  const auto context = tokens(20, f.n_vocab()), question = tokens(9, f.n_vocab(), 3);
  const auto press = make_press("streaming_llm", {});
  Session session(*f.model, f.pool,
                  {.engine = f.options, .capacity = 40, .press = press.get(), .budget = budget, .n_predict = 2});
  session.prefill(context);
  session.extend(question);
  for (int l = 0; l < session.kv().n_layers(); ++l)
    for (int h = 0; h < session.kv().n_kv_heads(); ++h) {
      const HeadCache& head = session.kv().head(l, h);
      ASSERT_EQ(head.size(), budget + 9);
      // sinks 0..3, the last two context tokens, then every question position in order
      const std::vector<int64_t> expected = {0, 1, 2, 3, 18, 19};
      for (int64_t i = 0; i < budget; ++i) EXPECT_EQ(head.position(i), expected[size_t(i)]);
      for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(head.position(budget + i), 20 + i);
    }
  EXPECT_EQ(session.n_past(), 29);
}

// TOVA's first decode step after an extension ranks every cached token by the decode token's
// attention, the extension included: softmax probabilities are all > 0, so no token's score may
// be the zero a decode-state sized before the extension would leave.
TEST(SessionExtend, TovaScoresTheExtensionAtTheFirstDecodeStep) {
  Fixture f;
  const int64_t budget = 8;
  const auto press = make_press("tova", {});
  Session session(*f.model, f.pool,
                  {.engine = f.options, .capacity = 64, .press = press.get(), .budget = budget, .n_predict = 4});
  session.record_scores();
  session.prefill(tokens(20, f.n_vocab()));
  const auto question = tokens(6, f.n_vocab(), 3);
  session.extend(question);
  session.decode(question.back());
  const ModelConfig& c = f.model->config();
  for (int layer = 0; layer < c.n_layers; ++layer)
    for (int h = 0; h < c.n_kv_heads; ++h) {
      const std::vector<float>& scores = session.recorded_scores(layer, h);
      ASSERT_EQ(scores.size(), size_t(budget + 6 + 1));
      for (size_t j = 0; j < scores.size(); ++j) EXPECT_GT(scores[j], 0.0f) << "layer " << layer << " token " << j;
      EXPECT_EQ(session.kv().head(layer, h).size(), budget);
    }
}

TEST(SessionExtend, ExtendBeforePrefillIsAnError) {
  Fixture f;
  Session session(*f.model, f.pool, {.engine = f.options, .capacity = 10});
  EXPECT_THROW(session.extend(tokens(3, f.n_vocab())), Error);
}

TEST(SessionExtend, GenerateWithAppendedTokensMatchesTheJoinedPromptUnderFull) {
  Fixture f;
  GenerateRequest joined, split;
  joined.n_predict = split.n_predict = 6;
  joined.sampling.temperature = split.sampling.temperature = 0;
  split.prompt = tokens(15, f.n_vocab());
  split.appended = tokens(7, f.n_vocab(), 1);
  joined.prompt = split.prompt;
  joined.prompt.insert(joined.prompt.end(), split.appended.begin(), split.appended.end());
  const GenerateResult a = generate(*f.model, f.pool, f.options, joined);
  const GenerateResult b = generate(*f.model, f.pool, f.options, split);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(b.n_prompt, 15);
  EXPECT_EQ(a.kv_bytes_prefill, b.kv_bytes_prefill);
  EXPECT_GT(b.kv_bytes_prefill, 0u);
}

TEST(SessionExtend, AppendedTokensCountAgainstTheContext) {
  Fixture f;
  f.options.context = 20;
  GenerateRequest request;
  request.prompt = tokens(15, f.n_vocab());
  request.appended = tokens(6, f.n_vocab());
  EXPECT_THROW(generate(*f.model, f.pool, f.options, request), Error);
}

TEST(AttentionOutputHook, ReportsEveryLayerAndChangesNothing) {
  Fixture f;
  const auto prompt = tokens(12, f.n_vocab());
  Session plain(*f.model, f.pool, {.engine = f.options, .capacity = 20}),
      hooked(*f.model, f.pool, {.engine = f.options, .capacity = 20});
  const int q_dim = f.model->config().q_dim();
  std::vector<int> layers, rows;
  std::vector<float> last_layer_output;
  hooked.set_attention_output_hook([&](int layer, const float* out, int n) {
    layers.push_back(layer);
    rows.push_back(n);
    last_layer_output.assign(out, out + size_t(n) * q_dim);
  });
  EXPECT_EQ(copy(plain.prefill(prompt), f.n_vocab()), copy(hooked.prefill(prompt), f.n_vocab()));
  EXPECT_EQ(copy(plain.decode(5), f.n_vocab()), copy(hooked.decode(5), f.n_vocab()));
  EXPECT_EQ(layers, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(rows, (std::vector<int>{12, 12, 1, 1}));
  // A decode step's attention output is a convex combination of value rows: finite, not all zero.
  ASSERT_EQ(last_layer_output.size(), size_t(q_dim));
  double norm = 0;
  for (float x : last_layer_output) norm += double(x) * x;
  EXPECT_TRUE(std::isfinite(norm));
  EXPECT_GT(norm, 0);
}

}  // namespace
}  // namespace kvslim
