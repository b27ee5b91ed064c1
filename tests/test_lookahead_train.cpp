// LookaheadKV training: the KL objective (zero exactly when the prediction is the truth), the
// training forward of the lookahead rows against the inference engine, and the gradient of the
// loss with respect to the embeddings and every LoRA matrix against central finite differences
// in double precision.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>

#include "lookahead/objective.h"
#include "lookahead/trainer.h"
#include "engine/session.h"
#include "press/registry.h"
#include "model/fingerprint.h"
#include "lookahead/prompt_target.h"
#include "model/forward.h"
#include "press/attention_accumulator.h"
#include "test_lookahead_adapter.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim {
namespace {

std::string tiny(Arch arch) {
  testing::TinyModel m;
  m.arch = arch;
  m.layers = 2;
  return testing::make_model(m);
}

std::vector<int32_t> tokens(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = 3 + int32_t(rng() % 250);
  return t;
}

// The adapter's embeddings and LoRA as one parameter buffer of the objective's layout.
template <class T>
std::vector<T> packed(const LookaheadAdapter& a) {
  std::vector<T> p(a.embd.begin(), a.embd.end());
  p.insert(p.end(), a.lora.params().begin(), a.lora.params().end());
  return p;
}

PromptTarget<double> in_double(const PromptTarget<float>& t) {
  PromptTarget<double> d;
  d.n = t.n;
  d.keys.assign(t.keys.begin(), t.keys.end());
  d.values.assign(t.values.begin(), t.values.end());
  d.importance.assign(t.importance.begin(), t.importance.end());
  return d;
}

TEST(LookaheadKl, ZeroExactlyWhenThePredictionIsTheTruth) {
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(0.01, 1.0);
  const int n = 17;
  std::vector<double> truth(n), w(n), grad(n);
  for (double& t : truth) t = u(rng);
  truth[4] = 0;  // a token the response never looks at
  double total = 0;
  for (double t : truth) total += t;
  for (double& t : truth) t /= total;
  // A prediction proportional to the truth (its zero entry still positive, as softmax is).
  for (int j = 0; j < n; ++j) w[j] = j == 4 ? 1e-300 : 3.5 * truth[j];
  EXPECT_NEAR(kl_to_normalized(truth.data(), w.data(), n, grad.data()), 0.0, 1e-12);
  for (int j = 0; j < n; ++j) EXPECT_NEAR(grad[j] * w[j], 0.0, 1e-12) << j;  // a minimum: no slope

  // Away from the truth the KL is positive, and its gradient matches finite differences.
  for (double& x : w) x = u(rng);
  const double kl = kl_to_normalized(truth.data(), w.data(), n, grad.data());
  EXPECT_GT(kl, 0.0);
  // By hand for two entries: truth (1, 0) against w (1, 3): KL = log(4).
  const double t2[2] = {1, 0}, w2[2] = {1, 3};
  EXPECT_NEAR(kl_to_normalized(t2, w2, 2, static_cast<double*>(nullptr)), std::log(4.0), 1e-15);
  for (int j = 0; j < n; ++j) {
    const double h = 1e-6 * w[j], keep = w[j];
    w[j] = keep + h;
    const double up = kl_to_normalized(truth.data(), w.data(), n, static_cast<double*>(nullptr));
    w[j] = keep - h;
    const double down = kl_to_normalized(truth.data(), w.data(), n, static_cast<double*>(nullptr));
    w[j] = keep;
    EXPECT_NEAR(grad[j], (up - down) / (2 * h), 1e-6 * std::max(1.0, std::abs(grad[j]))) << j;
  }
}

TEST(LookaheadTarget, TruthIsNormalisedAndKvIsTheEnginesPromptKv) {
  const auto model = Model::load(tiny(Arch::Llama));
  const ModelConfig& c = model->config();
  ThreadPool pool(2);
  const auto prompt = tokens(30, 1), response = tokens(5, 2);
  const PromptTarget<float> t = prompt_target(*model, pool, prompt, response);
  ASSERT_EQ(t.n, 30);
  for (int row = 0; row < c.n_layers * c.n_heads; ++row) {
    double s = 0;
    for (int j = 0; j < 30; ++j) s += t.importance[size_t(row) * 30 + j];
    EXPECT_NEAR(s, 1.0, 1e-5);
  }
  PagedKvCache cache(kv_shape(c), 30);
  Forward(*model, 64).run(prompt.data(), 30, 0, cache, pool);
  for (int l = 0; l < c.n_layers; ++l)
    for (int g = 0; g < c.n_kv_heads; ++g)
      for (int i = 0; i < 30; ++i)
        for (int d = 0; d < c.head_dim; ++d) {
          const size_t at = ((size_t(l) * c.n_kv_heads + g) * 30 + i) * c.head_dim + d;
          ASSERT_EQ(t.keys[at], cache.head(l, g).key_f32(i, nullptr)[d]);  // f32 pages: in place
          ASSERT_EQ(t.values[at], cache.head(l, g).value_f32(i, nullptr)[d]);
        }
}

// The training forward of the lookahead rows predicts what the inference press will see.
TEST(LookaheadObjective, PredictionIsTheEnginesLookaheadAttention) {
  for (Arch arch : {Arch::Llama, Arch::Qwen2, Arch::Qwen3}) {
    const auto model = Model::load(tiny(arch));
    const ModelConfig& c = model->config();
    ThreadPool pool(2);
    const LookaheadAdapter adapter = testing::random_adapter(*model, {6, 4, 16});
    const auto prompt = tokens(40, 3);
    const PromptTarget<float> target = prompt_target(*model, pool, prompt, tokens(4, 4));
    const FrozenModel<float> base(*model);
    LookaheadObjective<float> objective(base, 6, adapter.lora.layout(), adapter.lora.scale());
    const std::vector<float> params = packed<float>(adapter);
    objective.evaluate(params.data(), target, nullptr, pool);

    PagedKvCache cache(kv_shape(c), 46);
    Forward forward(*model, 64);
    forward.run(prompt.data(), 40, 0, cache, pool);
    AttentionAccumulator votes;
    votes.reset(c, 40, 40);
    cache.set_probe(&votes);
    forward.run_rows(adapter.embd.data(), 6, 40, cache, pool, &adapter.lora);
    for (int l = 0; l < c.n_layers; ++l)
      for (int h = 0; h < c.n_heads; ++h)
        for (int j = 0; j < 40; ++j)
          ASSERT_NEAR(objective.prompt_attention(l, h)[j], votes.q_head_sums(l, h)[j], 2e-5)
              << arch_name(arch) << " layer " << l << " head " << h << " token " << j;
  }
}

TEST(LookaheadObjective, GradientMatchesFiniteDifferencesInDouble) {
  for (Arch arch : {Arch::Llama, Arch::Qwen2, Arch::Qwen3}) {
    const auto model = Model::load(tiny(arch));
    ThreadPool pool(2);
    const LookaheadAdapter adapter = testing::random_adapter(*model, {3, 2, 4}, 11);
    const PromptTarget<double> target = in_double(prompt_target(*model, pool, tokens(12, 5), tokens(4, 6)));
    const FrozenModel<double> base(*model);
    LookaheadObjective<double> objective(base, 3, adapter.lora.layout(), adapter.lora.scale());
    std::vector<double> params = packed<double>(adapter), grads(params.size(), 0.0);
    const double loss = objective.evaluate(params.data(), target, grads.data(), pool);
    EXPECT_GT(loss, 0.0);

    // Every embedding coordinate of one row, and a few entries of A and B of every site and layer.
    std::vector<int64_t> coords;
    for (int d = 0; d < model->config().dim; ++d) coords.push_back(model->config().dim + d);
    const LoraLayout& layout = adapter.lora.layout();
    const int64_t lora0 = objective.embd_size();
    for (int l = 0; l < layout.n_layers(); ++l)
      for (LoraSite site : kAllLoraSites)
        for (int64_t k : {int64_t(0), int64_t(7), int64_t(layout.rank()) * layout.in(site)-1}) {
          coords.push_back(lora0 + layout.a_offset(l, site) + k);
          coords.push_back(lora0 + layout.b_offset(l, site) + k % (int64_t(layout.rank()) * layout.out(site)));
        }
    double max_err = 0, max_grad = 0;
    for (int64_t i : coords) {
      const double keep = params[i], h = 1e-5;
      params[i] = keep + h;
      const double up = objective.evaluate(params.data(), target, nullptr, pool);
      params[i] = keep - h;
      const double down = objective.evaluate(params.data(), target, nullptr, pool);
      params[i] = keep;
      const double numeric = (up - down) / (2 * h);
      max_grad = std::max(max_grad, std::abs(numeric));
      max_err = std::max(max_err, std::abs(numeric - grads[i]));
      EXPECT_NEAR(grads[i], numeric, 1e-8 + 1e-6 * std::abs(numeric)) << arch_name(arch) << " coordinate " << i;
    }
    EXPECT_GT(max_grad, 1e-4) << "the gradient should not vanish";
  }
}

}  // namespace
}  // namespace kvslim

namespace kvslim {
namespace {

LookaheadTrainOptions small_run(const std::string& cache) {
  LookaheadTrainOptions o;
  o.shape = {8, 4, 16};
  o.data.train_samples = 8;
  o.data.heldout_samples = 4;
  o.data.min_tokens = 64;
  o.data.max_tokens = 300;
  o.data.max_response = 8;
  o.data.cache_path = cache;
  o.steps = 40;
  o.batch = 2;
  o.lr = 3e-3f;
  o.eval_every = 0;
  o.recall_budget = 16;
  return o;
}

TEST(LookaheadTraining, AShortRunLowersTheHeldOutKl) {
  const auto model = Model::load(tiny(Arch::Llama));
  ThreadPool pool(2);
  const std::string cache = testing::temp_path("lookahead-responses-a.jsonl");
  std::filesystem::remove(cache);
  const LookaheadTrainOptions o = small_run(cache);
  const LookaheadAdapter start = LookaheadAdapter::initial(*model, o.shape, 1);
  TrainSummary s;
  int heldout_reports = 0;
  TrainCallbacks callbacks;
  callbacks.heldout = [&](int, const HeldOutMetrics&) { ++heldout_reports; };
  const LookaheadAdapter trained = train_lookahead(*model, pool, o, start, callbacks, s);
  EXPECT_EQ(heldout_reports, 2);  // before and after
  EXPECT_EQ(s.train_examples + s.heldout_examples + s.skipped, 12);
  ASSERT_GT(s.heldout_examples, 0);
  EXPECT_LT(s.final.kl, s.initial.kl * 0.95) << s.initial.kl << " -> " << s.final.kl;
  EXPECT_NE(trained.embd, start.embd);

  // Deterministic for a seed, and the second run takes every response from the cache.
  TrainSummary again;
  const LookaheadAdapter twice = train_lookahead(*model, pool, o, start, {}, again);
  EXPECT_EQ(twice.embd, trained.embd);
  EXPECT_TRUE(std::equal(twice.lora.params().begin(), twice.lora.params().end(), trained.lora.params().begin()));
  std::ifstream in(cache);
  const auto lines = std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n');
  EXPECT_EQ(lines, 1 + 12);  // header and one line per prompt, written once
}

TEST(LookaheadTraining, ResponsesOfAnotherModelAreRefused) {
  const auto model = Model::load(tiny(Arch::Llama));
  testing::TinyModel other_spec;
  other_spec.seed = 21;
  const auto other = Model::load(testing::make_model(other_spec));
  ThreadPool pool(2);
  const std::string cache = testing::temp_path("lookahead-responses-b.jsonl");
  std::filesystem::remove(cache);
  ResponseDataOptions d = small_run(cache).data;
  d.train_samples = 1;
  response_samples(*model, pool, d, false);
  try {
    response_samples(*other, pool, d, false);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("{:016x}", model_fingerprint(*model))), std::string::npos)
        << e.what();
  }
}

TEST(LookaheadTraining, BadOptionsAreRefused) {
  const auto model = Model::load(tiny(Arch::Llama));
  ThreadPool pool(1);
  LookaheadTrainOptions o = small_run("");
  const LookaheadAdapter start = LookaheadAdapter::initial(*model, o.shape, 1);
  TrainSummary s;
  o.steps = 0;
  EXPECT_THROW(train_lookahead(*model, pool, o, start, {}, s), Error);
  o = small_run("");
  o.data.max_tokens = 100000;  // beyond the model's context
  EXPECT_THROW(train_lookahead(*model, pool, o, start, {}, s), Error);
}

}  // namespace
}  // namespace kvslim

namespace kvslim {
namespace {

// The held-out recall the trainer reports is what the presses really keep: sessions running
// lookaheadkv (with the starting adapter) and snapkv on the held-out prompts.
TEST(LookaheadTraining, HeldOutRecallIsWhatThePressesKeep) {
  const auto model = Model::load(tiny(Arch::Llama));
  const ModelConfig& c = model->config();
  ThreadPool pool(2);
  LookaheadTrainOptions o = small_run("");
  o.data.heldout_samples = 3;
  o.data.min_tokens = 80;
  o.steps = 1;
  const LookaheadAdapter start = testing::random_adapter(*model, o.shape);
  HeldOutMetrics reported;
  TrainCallbacks callbacks;
  callbacks.heldout = [&](int step, const HeldOutMetrics& m) {
    if (step == 0) reported = m;
  };
  TrainSummary s;
  train_lookahead(*model, pool, o, start, callbacks, s);

  const std::string adapter = testing::temp_path("recall-start-adapter.gguf");
  start.save(adapter);
  const int budget = o.recall_budget;
  double lookahead = 0, snapkv = 0;
  int heads = 0;
  for (const ResponseSample& sample : response_samples(*model, pool, o.data, true)) {
    if (sample.response.empty()) continue;
    const PromptTarget<float> t = prompt_target(*model, pool, sample.prompt, sample.response);
    auto kept = [&](const std::string& method, const std::vector<std::string>& options) {
      const auto press = make_press(method, options);
      Session session(*model, pool,
                      {.engine = EngineOptions{},
                       .capacity = t.n + 1,
                       .press = press.get(),
                       .budget = budget,
                       .n_predict = 1,
                       .seed = 1});
      session.prefill(sample.prompt);
      std::vector<std::vector<int32_t>> out;
      for (int l = 0; l < c.n_layers; ++l)
        for (int g = 0; g < c.n_kv_heads; ++g) {
          std::vector<int32_t> positions;
          for (int64_t i = 0; i < session.kv().head(l, g).size(); ++i)
            positions.push_back(int32_t(session.kv().head(l, g).position(i)));
          out.push_back(positions);
        }
      return out;
    };
    const auto by_lookahead = kept("lookaheadkv", {"adapter=" + adapter});
    const auto by_snapkv = kept("snapkv", {});
    for (int l = 0; l < c.n_layers; ++l)
      for (int g = 0; g < c.n_kv_heads; ++g) {
        std::vector<float> truth(size_t(t.n), 0.0f);
        for (int h = g * c.group_size(); h < (g + 1) * c.group_size(); ++h)
          for (int64_t j = 0; j < t.n; ++j) truth[j] += t.importance[(size_t(l) * c.n_heads + h) * t.n + j];
        // Top B of the truth, ties to the lower position, ascending.
        std::vector<int32_t> order(size_t(t.n));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return truth[a] > truth[b]; });
        order.resize(budget);
        std::sort(order.begin(), order.end());
        auto hits = [&](const std::vector<int32_t>& keep) {
          int n = 0;
          for (int32_t p : keep) n += std::binary_search(order.begin(), order.end(), p);
          return double(n) / budget;
        };
        lookahead += hits(by_lookahead[size_t(l) * c.n_kv_heads + g]);
        snapkv += hits(by_snapkv[size_t(l) * c.n_kv_heads + g]);
        ++heads;
      }
  }
  ASSERT_GT(heads, 0);
  EXPECT_NEAR(reported.snapkv_recall, snapkv / heads, 1e-9);
  EXPECT_NEAR(reported.recall, lookahead / heads, 0.02);  // float paths may swap a near tie
}

}  // namespace
}  // namespace kvslim
