// LagKV, DapQ and LAQ against plain reference computations written here: LagKV on random K/V
// in a hand-filled cache (and its worked check 1000 -> 616 -> 592), DapQ against one forward of
// prompt + pseudo tokens, LAQ against SnapKV's greedy continuation rescored over the full
// prompt; GQA group sizes 1, 2, 4.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "engine/generate.h"
#include "engine/session.h"
#include "model/model.h"
#include "press/attention_accumulator.h"
#include "press/registry.h"
#include "press/select.h"
#include "fake_press_context.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim {
namespace {

using Rows = std::vector<std::vector<double>>;  // [token][channel]

// ---- a hand-filled cache behind a minimal PressContext ----

ModelConfig small_config(int kv_heads, int head_dim = 8) {
  ModelConfig c;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.n_rot = head_dim;
  c.dim = c.n_heads * head_dim;
  c.ffn_dim = 2 * c.dim;
  c.n_vocab = 300;
  c.context_length = 4096;
  return c;
}

class FakeContext final : public testing::FakePressContext {
 public:
  FakeContext(const ModelConfig& config, int64_t capacity, int64_t budget, uint64_t seed = 1)
      : FakePressContext(
            config,
            {.capacity = capacity, .page_tokens = 16, .budget = budget, .prompt = {}, .records_appended = true}),
        rng_(seed) {}

  // Appends n tokens of random K/V to every head at the next positions.
  void append_random(int n) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> k(size_t(config_.kv_dim()) * n), v(k.size());
    for (float& x : k) x = normal(rng_);
    for (float& x : v) x = normal(rng_);
    std::vector<int64_t> positions(n);
    std::iota(positions.begin(), positions.end(), n_past_);
    for (int l = 0; l < config_.n_layers; ++l) cache_.append(l, k.data(), v.data(), n, positions.data());
    n_past_ += n;
  }
  void set_prompt(std::vector<int32_t> prompt) { prompt_ = std::move(prompt); }

 private:
  std::mt19937 rng_;
};

Rows rows_of(const HeadCache& head, int d, bool values) {
  Rows rows(head.size(), std::vector<double>(d));
  for (int64_t i = 0; i < head.size(); ++i)
    for (int c = 0; c < d; ++c)
      rows[i][c] = values ? head.value_f32(i, nullptr)[c] : head.key_f32(i, nullptr)[c];  // f32 pages: in place
  return rows;
}

std::vector<int64_t> positions_of(const HeadCache& head) {
  std::vector<int64_t> p(head.size());
  for (int64_t i = 0; i < head.size(); ++i) p[i] = head.position(i);
  return p;
}

// Indices of the k largest (ties: lower index), ascending: the convention, written plainly.
std::vector<int64_t> top_k_plain(const std::vector<double>& s, int64_t k) {
  std::vector<int64_t> idx(s.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return s[a] > s[b]; });
  idx.resize(std::min<int64_t>(k, int64_t(idx.size())));
  std::sort(idx.begin(), idx.end());
  return idx;
}

// ---- LagKV reference (LagKV §2.2) ----

// softmax over the L tokens of partition [start, start+L) of the unbiased std over channels of
// the rows normalised by the next partition's per-channel min/max.
std::vector<double> lag_score(const Rows& z, int64_t start, int L) {
  const size_t d = z[0].size();
  std::vector<double> lo(d, 1e300), hi(d, -1e300), s(L);
  for (int64_t i = start + L; i < start + 2 * L; ++i)
    for (size_t c = 0; c < d; ++c) lo[c] = std::min(lo[c], z[i][c]), hi[c] = std::max(hi[c], z[i][c]);
  for (int t = 0; t < L; ++t) {
    std::vector<double> x(d);
    double mean = 0;
    for (size_t c = 0; c < d; ++c) {
      x[c] = hi[c] > lo[c] ? (z[start + t][c] - lo[c]) / (hi[c] - lo[c]) : 0.0;
      mean += x[c] / d;
    }
    double var = 0;
    for (size_t c = 0; c < d; ++c) var += (x[c] - mean) * (x[c] - mean) / (d - 1);
    s[t] = std::sqrt(var);
  }
  double sum = 0;
  for (double v : s) sum += std::exp(v);
  for (double& v : s) v = std::exp(v) / sum;
  return s;
}

std::vector<double> lag_partition_scores(const Rows& k, const Rows& v, int64_t start, int L, double value_weight) {
  std::vector<double> sk = lag_score(k, start, L), sv = lag_score(v, start, L);
  for (int t = 0; t < L; ++t) sk[t] += value_weight * sv[t];
  return sk;
}

// Recursive LagKV: kept indices of one compression at `base`.
std::vector<int64_t> lagkv_reference(const Rows& k, const Rows& v, int64_t base, int L, double rho, double wv) {
  const int64_t n = int64_t(k.size());
  std::vector<int64_t> keep(base);
  std::iota(keep.begin(), keep.end(), 0);
  const int64_t P = (n - base) / L;
  for (int64_t p = 0; p + 1 < P; ++p) {
    const int64_t start = base + p * L;
    for (int64_t i : top_k_plain(lag_partition_scores(k, v, start, L, wv), int64_t(std::floor(rho * L))))
      keep.push_back(start + i);
  }
  for (int64_t i = base + (P - 1) * L; i < n; ++i) keep.push_back(i);
  return keep;
}

// One-shot LagKV (kvpress): ranks / L inside each scored partition, 1 for sinks and the tail.
std::vector<int64_t> lagkv_oneshot_reference(const Rows& k, const Rows& v, int S, int L, int64_t budget) {
  const int64_t n = int64_t(k.size());
  std::vector<double> score(n, 1.0);
  if (n < S + 2 * L) {
    for (int64_t i = S; i < n; ++i) score[i] = double(i - S) / double(n - S);
  } else {
    const int64_t P = (n - S) / L;
    for (int64_t p = 0; p + 1 < P; ++p) {
      const std::vector<double> s = lag_partition_scores(k, v, S + p * L, L, 1.0);
      for (int t = 0; t < L; ++t) {
        int rank = 0;  // tokens ranked below t: lower score, or equal score at a higher index
        for (int u = 0; u < L; ++u) rank += s[u] < s[t] || (s[u] == s[t] && u > t);
        score[S + p * L + t] = double(rank) / L;
      }
    }
  }
  return top_k_plain(score, budget);
}

std::unique_ptr<Press> press(const std::string& name, const std::vector<std::string>& options = {}) {
  return make_press(name, options);
}

TEST(PressLagKv, MatchesTheReferenceForEveryGroupSize) {
  const int S = 4, L = 16;
  const double rho = 0.25, wv = 0.5;
  for (int kv_heads : {4, 2, 1}) {
    FakeContext ctx(small_config(kv_heads), 200, 10);  // the budget plays no part
    ctx.append_random(100);
    auto p = press("lagkv", {"sink=4", "lag=16", "rho=0.25", "value_weight=0.5"});
    p->begin(ctx);
    std::vector<std::vector<int64_t>> want;
    for (int l = 0; l < 2; ++l)
      for (int h = 0; h < kv_heads; ++h) {
        const HeadCache& head = ctx.cache().head(l, h);
        want.push_back(lagkv_reference(rows_of(head, 8, false), rows_of(head, 8, true), S, L, rho, wv));
      }
    p->after_prefill_block(ctx);  // default mode: nothing yet
    EXPECT_EQ(ctx.cache().head(0, 0).size(), 100);
    p->end_prefill(ctx);
    size_t i = 0;
    for (int l = 0; l < 2; ++l)
      for (int h = 0; h < kv_heads; ++h) {
        // P = floor(96/16) = 6: 5 partitions keep 4 each, then 16 + 0 verbatim: 4 + 20 + 16 = 40.
        EXPECT_EQ(ctx.cache().head(l, h).size(), 40);
        EXPECT_EQ(positions_of(ctx.cache().head(l, h)), want[i++]) << "layer " << l << " head " << h;
      }
  }
}

TEST(PressLagKv, WorkedCheck1000Keeps616ThenTheNextCompressionLeaves592) {
  FakeContext ctx(small_config(2), 1100, 1);
  ctx.append_random(1000);
  auto p = press("lagkv");
  p->check_budget(1);  // budget-free: never refused
  p->begin(ctx);
  const HeadCache& head = ctx.cache().head(1, 1);
  const auto want = lagkv_reference(rows_of(head, 8, false), rows_of(head, 8, true), 16, 128, 0.5, 1.0);
  p->end_prefill(ctx);
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 2; ++h) EXPECT_EQ(ctx.cache().head(l, h).size(), 616);
  EXPECT_EQ(positions_of(head), want);
  // base = 16 + 6 * 64 = 400: the next compression waits for 400 + 256 = 656 tokens.
  for (int step = 1; step < 40; ++step) {
    ctx.append_random(1);
    p->after_decode_step(ctx);
    ASSERT_EQ(head.size(), 616 + step);
  }
  ctx.append_random(1);
  const auto before = positions_of(head);
  std::vector<int64_t> want_next;
  for (int64_t i : lagkv_reference(rows_of(head, 8, false), rows_of(head, 8, true), 400, 128, 0.5, 1.0))
    want_next.push_back(before[i]);
  p->after_decode_step(ctx);
  EXPECT_EQ(head.size(), 592);  // 400 + 64 + 128
  EXPECT_EQ(positions_of(head), want_next);
}

TEST(PressLagKv, RecursesEveryLagTokensInADecodingSession) {
  testing::TinyModel m;
  const auto model = Model::load(testing::make_model(m));
  ThreadPool pool(2);
  EngineOptions options;
  options.batch = 256;  // four prefill blocks; default mode compresses once, at the end
  auto p = press("lagkv");
  Session session(*model, pool, {.engine = options, .capacity = 1100, .press = p.get(), .budget = 5, .n_predict = 100});
  std::vector<int32_t> prompt(1000);
  for (int i = 0; i < 1000; ++i) prompt[i] = 3 + (i * 53 + 7) % (model->config().n_vocab - 3);
  const float* logits = session.prefill(prompt);
  for (int l = 0; l < m.layers; ++l)
    for (int h = 0; h < m.kv_heads; ++h) ASSERT_EQ(session.kv().head(l, h).size(), 616);
  const int n_vocab = model->config().n_vocab;
  for (int step = 1; step <= 40; ++step) {
    logits = session.decode(int32_t(std::max_element(logits, logits + n_vocab) - logits));
    EXPECT_EQ(session.kv().head(0, 1).size(), step < 40 ? 616 + step : 592) << "step " << step;
  }
  EXPECT_EQ(session.n_past(), 1040);
}

TEST(PressLagKv, EveryBlockCompressesAfterEachPrefillBlock) {
  FakeContext ctx(small_config(2), 1100, 1);
  auto p = press("lagkv", {"every_block=true"});
  p->begin(ctx);
  // Blocks of 300 (S=16, L=128, keep 64): 300 -> 16+64+156 = 236 (base 80); +300 = 536 -> 80+128+200
  // = 408 (base 208); +300 = 708 -> 208+128+244 = 580 (base 336); +100 = 680 -> 336+64+216 = 616.
  for (auto [block, size] : std::vector<std::pair<int, int64_t>>{{300, 236}, {300, 408}, {300, 580}, {100, 616}}) {
    ctx.append_random(block);
    p->after_prefill_block(ctx);
    for (int l = 0; l < 2; ++l) EXPECT_EQ(ctx.cache().head(l, 0).size(), size);
  }
  p->end_prefill(ctx);  // nothing more at the end
  EXPECT_EQ(ctx.cache().head(0, 0).size(), 616);
}

TEST(PressLagKv, OneShotKeepsTheGlobalTopBudgetOfRanks) {
  for (int kv_heads : {4, 2, 1})
    for (int64_t budget : {150, 30}) {  // 30 < sinks + tail: the earliest of them win the tie
      FakeContext ctx(small_config(kv_heads), 400, budget);
      ctx.append_random(300);  // S=4, L=32: 9 partitions, 8 scored, tail 32 + 8
      auto p = press("lagkv", {"mode=oneshot", "sink=4", "lag=32"});
      p->begin(ctx);
      std::vector<std::vector<int64_t>> want;
      for (int l = 0; l < 2; ++l)
        for (int h = 0; h < kv_heads; ++h) {
          const HeadCache& head = ctx.cache().head(l, h);
          want.push_back(lagkv_oneshot_reference(rows_of(head, 8, false), rows_of(head, 8, true), 4, 32, budget));
        }
      p->end_prefill(ctx);
      size_t i = 0;
      for (int l = 0; l < 2; ++l)
        for (int h = 0; h < kv_heads; ++h) {
          EXPECT_EQ(ctx.cache().head(l, h).size(), budget);
          EXPECT_EQ(positions_of(ctx.cache().head(l, h)), want[i++]);
        }
      const int64_t size_before = ctx.cache().head(0, 0).size();
      ctx.append_random(200);
      p->after_decode_step(ctx);  // one-shot: prefill only
      EXPECT_EQ(ctx.cache().head(0, 0).size(), size_before + 200);
    }
}

TEST(PressLagKv, OneShotOnAShortPromptKeepsSinksThenTheMostRecent) {
  FakeContext ctx(small_config(2), 100, 20);
  ctx.append_random(50);  // < 16 + 2 * 128
  auto p = press("lagkv", {"mode=oneshot"});
  p->begin(ctx);
  p->end_prefill(ctx);
  std::vector<int64_t> want(16);
  std::iota(want.begin(), want.end(), 0);
  for (int64_t i = 46; i < 50; ++i) want.push_back(i);
  EXPECT_EQ(positions_of(ctx.cache().head(0, 0)), want);
}

TEST(PressLagKv, BadOptionsAreRefused) {
  EXPECT_THROW(press("lagkv", {"rho=0"}), Error);
  EXPECT_THROW(press("lagkv", {"rho=1.5"}), Error);
  EXPECT_THROW(press("lagkv", {"lag=1"}), Error);
  EXPECT_THROW(press("lagkv", {"lag=4", "rho=0.2"}), Error);  // floor(0.8) = 0 tokens kept
  EXPECT_THROW(press("lagkv", {"mode=sometimes"}), Error);
  EXPECT_NO_THROW(press("lagkv")->check_budget(1));
}

// ---- sessions on tiny random models ----

std::unique_ptr<Model> tiny_model(int kv_heads) {
  testing::TinyModel m;
  m.kv_heads = kv_heads;
  m.heads = 4;
  return Model::load(testing::make_model(m));
}

std::vector<int32_t> prompt_tokens(int n, int n_vocab) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = 3 + (i * 53 + 7) % (n_vocab - 3);
  return t;
}

int32_t argmax(const float* logits, int n) { return int32_t(std::max_element(logits, logits + n) - logits); }

// Scores every prompt token by pooled group-mean votes: votes[layer][q head][j] -> [layer][kv head][j].
std::vector<std::vector<double>> pooled_group_mean(const std::vector<std::vector<std::vector<double>>>& votes,
                                                   int group, int kernel) {
  std::vector<std::vector<double>> out;
  for (const auto& layer : votes)
    for (size_t h = 0; h < layer.size() / group; ++h) {
      const size_t n = layer[0].size();
      std::vector<double> mean(n, 0.0), pooled(n);
      for (int g = 0; g < group; ++g)
        for (size_t j = 0; j < n; ++j) mean[j] += layer[h * group + g][j] / group;
      for (size_t j = 0; j < n; ++j) {
        pooled[j] = mean[j];
        for (int o = -kernel / 2; o <= kernel / 2; ++o)
          if (int64_t(j) + o >= 0 && int64_t(j) + o < int64_t(n)) pooled[j] = std::max(pooled[j], mean[j + o]);
      }
      out.push_back(pooled);
    }
  return out;
}

// The session's scores match the reference, and what it kept is a top-`budget` of the reference
// (up to rounding: no kept token scores clearly below the budget-th best).
void expect_scores_and_kept(const Session& session, const std::vector<std::vector<double>>& ref, int64_t budget,
                            int64_t n_prompt) {
  const PagedKvCache& kv = session.kv();
  for (int l = 0; l < kv.n_layers(); ++l)
    for (int h = 0; h < kv.n_kv_heads(); ++h) {
      const std::vector<double>& want = ref[size_t(l) * kv.n_kv_heads() + h];
      const std::vector<float>& got = session.recorded_scores(l, h);
      ASSERT_EQ(got.size(), want.size());
      for (size_t j = 0; j < want.size(); ++j) ASSERT_NEAR(got[j], want[j], 1e-4) << "layer " << l << " token " << j;
      std::vector<double> sorted = want;
      std::sort(sorted.begin(), sorted.end(), std::greater<>());
      const HeadCache& head = kv.head(l, h);
      ASSERT_EQ(head.size(), budget);
      for (int64_t i = 0; i < head.size(); ++i) {
        ASSERT_LT(head.position(i), n_prompt);
        EXPECT_GE(want[head.position(i)], sorted[budget - 1] - 1e-4);
      }
    }
}

// Sums attention rows of queries at positions >= from over the first n keys (a reference probe).
class RowRecorder final : public Press {
 public:
  RowRecorder(int64_t n_keys, int64_t from) : n_keys_(n_keys), from_(from) {}
  AttentionProbe* prefill_probe() override { return &rows; }
  void begin(PressContext& ctx) override { rows.reset(ctx.config(), n_keys_, from_); }
  AttentionAccumulator rows;

 private:
  int64_t n_keys_, from_;
};

std::vector<std::vector<std::vector<double>>> votes_of(const AttentionAccumulator& acc, const ModelConfig& c) {
  std::vector<std::vector<std::vector<double>>> votes(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l)
    for (int qh = 0; qh < c.n_heads; ++qh)
      votes[l].emplace_back(acc.q_head_sums(l, qh), acc.q_head_sums(l, qh) + acc.n_keys());
  return votes;
}

// ---- DapQ ----

TEST(PressDapq, PseudoTokensAreTheFirstAndLastPromptIds) {
  auto run = [](int n, int64_t budget, const std::vector<std::string>& options) {
    FakeContext ctx(small_config(2), 200, budget);
    std::vector<int32_t> prompt(n);
    std::iota(prompt.begin(), prompt.end(), 100);
    ctx.set_prompt(prompt);
    ctx.append_random(n);
    auto p = press("dapq", options);
    p->begin(ctx);
    p->end_prefill(ctx);
    EXPECT_EQ(ctx.appended_at, std::vector<int64_t>(ctx.appended.size(), n));  // at positions n, n+1, ...
    return ctx.appended;
  };
  std::vector<int32_t> want = {100, 101, 102, 103};
  for (int i = 50 - 28; i < 50; ++i) want.push_back(100 + i);
  EXPECT_EQ(run(50, 20, {}), std::vector<std::vector<int32_t>>{want});
  EXPECT_EQ(run(50, 20, {"a=2", "b=3"}), (std::vector<std::vector<int32_t>>{{100, 101, 147, 148, 149}}));
  // A prompt shorter than b gives all its ids to the suffix part.
  EXPECT_EQ(
      run(10, 5, {}),
      (std::vector<std::vector<int32_t>>{{100, 101, 102, 103, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109}}));
  EXPECT_TRUE(run(50, 50, {}).empty());  // budget >= prompt: no extra forward pass
}

TEST(PressDapq, ScoresAreTheAttentionOfPromptPlusPseudoTokensInOneForward) {
  const int n = 90;
  const int64_t budget = 24;
  for (int kv_heads : {4, 2, 1}) {
    const auto model = tiny_model(kv_heads);
    const ModelConfig& c = model->config();
    ThreadPool pool(2);
    EngineOptions options;
    options.batch = 16;
    const auto prompt = prompt_tokens(n, c.n_vocab);
    std::vector<int32_t> extended = prompt;
    extended.insert(extended.end(), prompt.begin(), prompt.begin() + 4);
    extended.insert(extended.end(), prompt.end() - 28, prompt.end());

    // Reference: the pseudo tokens prefilled right after the prompt, positions n .. n+31.
    RowRecorder recorder(n, n);
    Session reference(*model, pool, {.engine = options, .capacity = n + 32, .press = &recorder});
    reference.prefill(extended);
    const auto ref = pooled_group_mean(votes_of(recorder.rows, c), c.group_size(), 7);

    auto p = press("dapq");
    Session session(*model, pool, {.engine = options, .capacity = n + 32, .press = p.get(), .budget = budget});
    session.record_scores();
    session.prefill(prompt);
    EXPECT_EQ(session.n_past(), n);
    expect_scores_and_kept(session, ref, budget, n);  // sizes == budget: the pseudo KV is gone
  }
}

GenerateResult generate_greedy(const Model& model, const std::string& method, std::optional<int64_t> budget,
                               int n_prompt, int n_predict) {
  ThreadPool pool(2);
  EngineOptions options;
  options.batch = 32;
  GenerateRequest request;
  request.prompt = prompt_tokens(n_prompt, model.config().n_vocab);
  request.n_predict = n_predict;
  request.sampling.temperature = 0;
  request.compression.press = method;
  request.compression.budget = budget;
  return generate(model, pool, options, request);
}

TEST(PressDapq, FirstGeneratedTokenIsTheFullCachesOne) {
  const auto model = tiny_model(2);
  const GenerateResult full = generate_greedy(*model, "full", std::nullopt, 120, 40);
  for (const std::string method : {"dapq", "laq"}) {
    const GenerateResult r = generate_greedy(*model, method, 40, 120, 40);
    ASSERT_FALSE(r.tokens.empty());
    EXPECT_EQ(r.tokens[0], full.tokens[0]) << method;
    EXPECT_EQ(r.kept_tokens, 40.0) << method;
  }
}

TEST(PressDapq, BadOptionsAreRefused) {
  EXPECT_THROW(press("dapq", {"a=0", "b=0"}), Error);
  EXPECT_THROW(press("dapq", {"kernel=6"}), Error);
  EXPECT_THROW(press("dapq", {"pooling=min"}), Error);
}

// ---- LAQ ----

// Records each decode step's queries per layer; attention stays dense.
class QueryRecorder final : public SparseSelector {
 public:
  bool select(int layer, const float* q, const PagedKvCache& cache, std::vector<std::vector<int32_t>>&,
              ThreadPool&) override {
    queries.emplace_back(layer, std::vector<float>(q, q + size_t(cache.n_heads()) * cache.head_dim()));
    return false;
  }
  std::vector<std::pair<int, std::vector<float>>> queries;  // in call order
};

// `inner` with a QueryRecorder as its decode-time selector.
class RecordingQueries final : public Press {
 public:
  explicit RecordingQueries(Press& inner) : inner_(inner) {}
  AttentionProbe* prefill_probe() override { return inner_.prefill_probe(); }
  SparseSelector* sparse_selector() override { return &recorder; }
  void begin(PressContext& ctx) override { inner_.begin(ctx); }
  void after_prefill_block(PressContext& ctx) override { inner_.after_prefill_block(ctx); }
  void end_prefill(PressContext& ctx) override { inner_.end_prefill(ctx); }
  QueryRecorder recorder;

 private:
  Press& inner_;
};

TEST(PressLaq, ScoresAreSnapKvsGreedyContinuationsQueriesOverTheFullPrompt) {
  const int n = 100, w = 32, d = 16;
  const int64_t budget = 40;
  for (int kv_heads : {4, 2, 1}) {
    const auto model = tiny_model(kv_heads);
    const ModelConfig& c = model->config();
    ASSERT_EQ(c.head_dim, d);
    const int group = c.group_size();
    ThreadPool pool(2);
    EngineOptions options;
    options.batch = 16;
    const auto prompt = prompt_tokens(n, c.n_vocab);

    // The full prompt KV.
    Session full(*model, pool, {.engine = options, .capacity = n});
    full.prefill(prompt);
    // SnapKV's cache and its greedy continuation of w tokens, with their queries and keys.
    auto snapkv = press("snapkv");
    RecordingQueries recording(*snapkv);
    Session draft(*model, pool, {.engine = options, .capacity = n + w, .press = &recording, .budget = budget});
    const float* logits = draft.prefill(prompt);
    for (int i = 0; i < w; ++i) logits = draft.decode(argmax(logits, c.n_vocab));
    ASSERT_EQ(recording.recorder.queries.size(), size_t(w) * c.n_layers);

    // votes[l][qh][j]: softmax over the full prompt keys plus the pseudo keys up to the query.
    std::vector<std::vector<std::vector<double>>> votes(
        c.n_layers, std::vector<std::vector<double>>(c.n_heads, std::vector<double>(n, 0.0)));
    for (size_t r = 0; r < recording.recorder.queries.size(); ++r) {
      const auto& [l, q] = recording.recorder.queries[r];
      const int step = int(r / c.n_layers);
      for (int qh = 0; qh < c.n_heads; ++qh) {
        const HeadCache& prompt_keys = full.kv().head(l, qh / group);
        const HeadCache& draft_keys = draft.kv().head(l, qh / group);
        // The keys as attention reads them (decoded from the sessions' page type).
        std::vector<std::vector<float>> decoded(size_t(n + step + 1), std::vector<float>(size_t(c.head_dim)));
        std::vector<const float*> keys;
        for (int j = 0; j < n; ++j) keys.push_back(prompt_keys.key_f32(j, decoded[size_t(j)].data()));
        for (int i = 0; i <= step; ++i) keys.push_back(draft_keys.key_f32(budget + i, decoded[size_t(n + i)].data()));
        std::vector<double> logit(keys.size());
        double top = -1e300, sum = 0;
        for (size_t j = 0; j < keys.size(); ++j) {
          for (int ch = 0; ch < d; ++ch) logit[j] += double(q[size_t(qh) * d + ch]) * keys[j][ch];
          logit[j] /= std::sqrt(double(d));
          top = std::max(top, logit[j]);
        }
        for (double& x : logit) sum += (x = std::exp(x - top));
        for (int j = 0; j < n; ++j) votes[l][qh][j] += logit[j] / sum;
      }
    }
    const auto ref = pooled_group_mean(votes, group, 7);

    auto laq = press("laq");
    Session session(*model, pool, {.engine = options, .capacity = n + w, .press = laq.get(), .budget = budget});
    session.record_scores();
    session.prefill(prompt);
    EXPECT_EQ(session.n_past(), n);
    expect_scores_and_kept(session, ref, budget, n);
  }
}

TEST(PressQueries, DeterministicAndWithinTheBudget) {
  const auto model = tiny_model(1);
  for (const auto& [method, options] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"dapq", {}}, {"laq", {"window=8", "lookahead=12"}}, {"lagkv", {"mode=oneshot", "sink=4", "lag=16"}}}) {
    auto run = [&] {
      ThreadPool pool(2);
      auto p = press(method, options);
      EngineOptions engine;
      engine.batch = 32;
      Session session(*model, pool, {.engine = engine, .capacity = 80 + 32, .press = p.get(), .budget = 20});
      session.prefill(prompt_tokens(80, model->config().n_vocab));
      std::vector<std::vector<int64_t>> kept;
      for (int l = 0; l < session.kv().n_layers(); ++l) {
        kept.push_back(positions_of(session.kv().head(l, 0)));
        EXPECT_LE(session.kv().head(l, 0).size(), 20) << method;
      }
      return kept;
    };
    EXPECT_EQ(run(), run()) << method;
  }
}

TEST(PressLaq, WindowLargerThanTheBudgetIsRefused) {
  EXPECT_THROW(press("laq")->check_budget(16), Error);
  EXPECT_NO_THROW(press("laq", {"window=8"})->check_budget(16));
  EXPECT_THROW(press("laq", {"lookahead=0"}), Error);
}

}  // namespace
}  // namespace kvslim
