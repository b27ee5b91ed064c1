// H2O, PyramidKV, AdaKV and KeyDiff against plain double-precision references written here, on
// random keys, values and queries driven through a real PagedKvCache by a small fake session
// (GQA group sizes 1, 2, 4), plus the hand-checkable cases: PyramidKV's per-layer budgets,
// AdaKV's unequal head counts, KeyDiff's anchor vs pairwise form and its bounded block prefill.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>

#include "engine/session.h"
#include "model/model.h"
#include "press/forwarding_press.h"
#include "press/registry.h"
#include "press/scorer_press.h"
#include "fake_press_context.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim {
namespace {

constexpr int kHeadDim = 16;

ModelConfig make_config(int layers, int heads, int kv_heads) {
  ModelConfig c;
  c.n_layers = layers;
  c.n_heads = heads;
  c.n_kv_heads = kv_heads;
  c.head_dim = kHeadDim;
  c.n_rot = kHeadDim;
  c.dim = heads * kHeadDim;
  c.ffn_dim = c.dim;
  c.n_vocab = 16;
  c.context_length = 4096;
  return c;
}

// A session without a model: random keys, values and queries go through a real PagedKvCache
// (its attention feeds the press's probes) and the press's hooks run as Session runs them.
// Every key and query is remembered by position for the references.
class FakeSession final : public testing::FakePressContext {
 public:
  // Pages store `page_type` (keys and values); the remembered keys are rounded through it, so
  // the references see exactly the numbers attention and the methods read.
  FakeSession(const ModelConfig& config, int64_t n_prompt, int64_t budget, int n_predict = 0, uint64_t seed = 11,
              DType page_type = DType::F32)
      : FakePressContext(config, {.capacity = n_prompt + n_predict + 1,
                                  .page_type = page_type,
                                  .budget = budget,
                                  .prompt = std::vector<int32_t>(size_t(n_prompt), 0),
                                  .n_predict = n_predict,
                                  .seed = 3}),
        page_type_(page_type),
        rng_(seed),
        keys_(config.n_layers),
        queries_(config.n_layers) {}

  // Key head h of every token is multiplied by key_scale[h] (empty: 1), and the keys of decoded
  // tokens by decode_key_scale.
  std::vector<float> key_scale;
  float decode_key_scale = 1.0f;

  void begin(Press& press) {
    press.begin(*this);
    cache_.set_probe(press.prefill_probe());
  }
  // The prompt in engine blocks of `block`, calling after_prefill_block after each; `watch`
  // sees the cache right after each block's forward pass.
  void prefill_blocks(Press& press, int block, const std::function<void()>& watch = {}) {
    while (n_past_ < n_prompt()) {
      const int n = int(std::min<int64_t>(block, n_prompt() - n_past_));
      press.before_prefill_block(*this, n);
      forward(n);
      if (watch) watch();
      press.after_prefill_block(*this);
    }
  }
  void end_prefill(Press& press) {
    cache_.set_probe(nullptr);
    press.end_prefill(*this);
    cache_.set_probe(press.decode_probe());
  }
  void prefill(Press& press, int block) {
    begin(press);
    prefill_blocks(press, block);
    end_prefill(press);
  }
  void decode_step(Press& press) {
    forward(1);
    press.after_decode_step(*this);
  }

  const float* key_at(int layer, int64_t position, int kv_head) const {
    return &keys_[layer][size_t(position) * config_.kv_dim() + size_t(kv_head) * kHeadDim];
  }
  const float* query_at(int layer, int64_t position, int q_head) const {
    return &queries_[layer][size_t(position) * config_.q_dim() + size_t(q_head) * kHeadDim];
  }
  std::vector<int64_t> positions(int layer, int kv_head) const {
    const HeadCache& head = cache_.head(layer, kv_head);
    std::vector<int64_t> p(head.size());
    for (int64_t i = 0; i < head.size(); ++i) p[i] = head.position(i);
    return p;
  }

 private:
  void forward(int n) {
    std::normal_distribution<float> normal;
    const int kv_dim = config_.kv_dim(), q_dim = config_.q_dim();
    std::vector<float> k(size_t(n) * kv_dim), v(size_t(n) * kv_dim), q(size_t(n) * q_dim), out(q.size());
    std::vector<int64_t> pos(n);
    std::iota(pos.begin(), pos.end(), n_past_);
    for (int layer = 0; layer < config_.n_layers; ++layer) {
      for (size_t i = 0; i < k.size(); ++i) {
        const size_t head = (i % kv_dim) / kHeadDim;
        const bool decoded = pos[i / kv_dim] >= n_prompt();
        k[i] = normal(rng_) * (key_scale.empty() ? 1.0f : key_scale[head]) * (decoded ? decode_key_scale : 1.0f);
        v[i] = normal(rng_);
      }
      for (float& x : q) x = 1.5f * normal(rng_);
      cache_.append(layer, k.data(), v.data(), n, pos.data());
      std::vector<uint8_t> stored(row_bytes(page_type_, kHeadDim));
      for (size_t r = 0; r < k.size() / kHeadDim; ++r) {  // what the pages hold
        convert_from_f32(&k[r * kHeadDim], page_type_, stored.data(), kHeadDim);
        convert_to_f32(page_type_, stored.data(), &k[r * kHeadDim], kHeadDim);
      }
      keys_[layer].insert(keys_[layer].end(), k.begin(), k.end());
      queries_[layer].insert(queries_[layer].end(), q.begin(), q.end());
      cache_.attend(layer, q.data(), n, out.data(), pool_);
    }
    n_past_ += n;
  }

  DType page_type_;
  std::mt19937 rng_;
  ThreadPool pool_{2};
  std::vector<std::vector<float>> keys_, queries_;  // [layer][position][heads * head_dim]
};

// ---- plain references (double precision) ----

double dot(const float* a, const float* b) {
  double s = 0;
  for (int c = 0; c < kHeadDim; ++c) s += double(a[c]) * b[c];
  return s;
}

// softmax(q.k / sqrt(d)) over `keys`.
std::vector<double> softmax_row(const float* q, const std::vector<const float*>& keys) {
  std::vector<double> p(keys.size());
  double max = -INFINITY, sum = 0;
  for (size_t j = 0; j < keys.size(); ++j) max = std::max(max, p[j] = dot(q, keys[j]) / std::sqrt(double(kHeadDim)));
  for (double& x : p) sum += x = std::exp(x - max);
  for (double& x : p) x /= sum;
  return p;
}

// Column sums of one query head's full causal attention over the prompt, queries from `from` on.
std::vector<double> column_sums(const FakeSession& s, int layer, int q_head, int64_t n, int64_t from) {
  const int kv_head = q_head / s.config().group_size();
  std::vector<double> sums(n, 0.0);
  std::vector<const float*> keys;
  for (int64_t t = 0; t < n; ++t) {
    keys.push_back(s.key_at(layer, t, kv_head));
    if (t < from) continue;
    const std::vector<double> p = softmax_row(s.query_at(layer, t, q_head), keys);
    for (int64_t j = 0; j <= t; ++j) sums[j] += p[j];
  }
  return sums;
}

std::vector<double> group_mean_column_sums(const FakeSession& s, int layer, int kv_head, int64_t n, int64_t from) {
  const int group = s.config().group_size();
  std::vector<double> mean(n, 0.0);
  for (int g = 0; g < group; ++g) {
    const std::vector<double> sums = column_sums(s, layer, kv_head * group + g, n, from);
    for (int64_t j = 0; j < n; ++j) mean[j] += sums[j] / group;
  }
  return mean;
}

// Indices of the k best scores (ties: lower index), ascending.
std::vector<int64_t> top_k(const std::vector<double>& scores, int64_t k) {
  std::vector<int64_t> idx(scores.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return scores[a] > scores[b]; });
  idx.resize(std::min<int64_t>(k, int64_t(idx.size())));
  std::sort(idx.begin(), idx.end());
  return idx;
}

// Equal within fp32 rounding; +inf (forced tokens) exactly.
void expect_scores(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isinf(want[i]))
      EXPECT_EQ(got[i], float(want[i])) << "token " << i;
    else
      EXPECT_NEAR(got[i], want[i], 1e-5 * std::max(1.0, std::abs(want[i]))) << "token " << i;
  }
}

ScorerPress& as_scorer(Press& press) {
  auto* scorer = dynamic_cast<ScorerPress*>(&press);
  if (!scorer) throw std::runtime_error("not a ScorerPress");
  return *scorer;
}

class PressScores : public ::testing::TestWithParam<int> {  // KV heads of 4 query heads: G = 1, 2, 4
 protected:
  ModelConfig config(int layers = 2) const { return make_config(layers, 4, GetParam()); }
};

// ---- H2O ----

TEST_P(PressScores, H2oScoresAreTheColumnSumsOfTheFullCausalAttention) {
  const int64_t n = 45, budget = 14, recent = 7;  // R = B/2
  FakeSession s(config(), n, budget);
  const auto press = make_press("h2o", {});
  s.begin(*press);
  s.prefill_blocks(*press, 16);  // chunked prefill: the column sums span the blocks
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < GetParam(); ++h) {
      std::vector<double> want = group_mean_column_sums(s, l, h, n, 0);
      for (int64_t j = n - recent; j < n; ++j) want[j] = INFINITY;
      expect_scores(as_scorer(*press).score(s, l, h), want);
    }
  s.end_prefill(*press);
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < GetParam(); ++h) {
      std::vector<double> want = group_mean_column_sums(s, l, h, n, 0);
      for (int64_t j = n - recent; j < n; ++j) want[j] = INFINITY;
      EXPECT_EQ(s.positions(l, h), top_k(want, budget)) << "layer " << l << " head " << h;
    }
}

// H2O's state for one KV head as the spec states it: kept positions and, aligned with them, the
// attention each query head of the group has given them.
struct H2oReference {
  std::vector<int64_t> kept;
  std::vector<std::vector<double>> sums;  // [group member][kept token]

  std::vector<double> scores(int64_t recent) const {
    std::vector<double> m(kept.size(), 0.0);
    for (const auto& sg : sums)
      for (size_t i = 0; i < kept.size(); ++i) m[i] += sg[i] / double(sums.size());
    for (size_t i = m.size() - recent; i < m.size(); ++i) m[i] = INFINITY;
    return m;
  }
  // Returns whether a token older than the one just leaving the recent window was evicted.
  bool keep_top(int64_t budget, int64_t recent) {
    const std::vector<int64_t> idx = top_k(scores(recent), budget);
    const int64_t newest_candidate = int64_t(kept.size()) - recent - 1;
    const bool older = std::find(idx.begin(), idx.end(), newest_candidate) != idx.end();
    std::vector<int64_t> k2;
    for (int64_t i : idx) k2.push_back(kept[i]);
    kept = k2;
    for (auto& sg : sums) {
      std::vector<double> s2;
      for (int64_t i : idx) s2.push_back(sg[i]);
      sg = s2;
    }
    return older;
  }
};

// The scores follow evictions: after every decode step the press's scores and kept tokens equal
// a reference that accumulates each new query's attention over what it kept and evicts the
// lowest-scored non-recent token. Decoded tokens get long keys, so that they draw much attention
// and outscore weak old tokens: evictions reach beyond the token leaving the recent window.
TEST_P(PressScores, H2oDecodeAccumulatesAndEvictsTheLowestNonRecentToken) {
  const int64_t n = 30, budget = 12, recent = 3;
  const int steps = 12, kv_heads = GetParam(), group = 4 / kv_heads;
  FakeSession s(config(), n, budget, steps);
  s.decode_key_scale = 4.0f;
  const auto press = make_press("h2o", {"recent=0.25"});
  s.prefill(*press, 8);
  std::vector<H2oReference> ref(2 * kv_heads);
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < kv_heads; ++h) {
      H2oReference& r = ref[l * kv_heads + h];
      r.kept.resize(n);
      std::iota(r.kept.begin(), r.kept.end(), 0);
      for (int g = 0; g < group; ++g) r.sums.push_back(column_sums(s, l, h * group + g, n, 0));
      r.keep_top(budget, recent);
    }
  int older_evictions = 0;
  for (int step = 0; step < steps; ++step) {
    s.decode_step(*press);
    const int64_t p = n + step;
    for (int l = 0; l < 2; ++l)
      for (int h = 0; h < kv_heads; ++h) {
        H2oReference& r = ref[l * kv_heads + h];
        r.kept.push_back(p);
        std::vector<const float*> keys;
        for (int64_t pos : r.kept) keys.push_back(s.key_at(l, pos, h));
        for (int g = 0; g < group; ++g) {
          r.sums[g].push_back(0.0);
          const std::vector<double> row = softmax_row(s.query_at(l, p, h * group + g), keys);
          for (size_t i = 0; i < row.size(); ++i) r.sums[g][i] += row[i];
        }
        older_evictions += r.keep_top(budget, recent);
        ASSERT_EQ(s.positions(l, h), r.kept) << "step " << step << " layer " << l << " head " << h;
        const std::vector<double> want = r.scores(recent);
        expect_scores(as_scorer(*press).score(s, l, h), want);
      }
  }
  EXPECT_GT(older_evictions, 0) << "every decode eviction took the token leaving the recent window";
}

TEST_P(PressScores, H2oRecentOptionAndDecodeOff) {
  const int64_t n = 40, budget = 10;
  FakeSession s(config(), n, budget, 4);
  const auto press = make_press("h2o", {"recent=0.3", "decode=false"});
  EXPECT_EQ(press->decode_probe(), nullptr);
  s.prefill(*press, 40);
  for (int h = 0; h < GetParam(); ++h) {
    std::vector<double> want = group_mean_column_sums(s, 1, h, n, 0);
    for (int64_t j = n - 3; j < n; ++j) want[j] = INFINITY;  // R = floor(0.3 * 10)
    EXPECT_EQ(s.positions(1, h), top_k(want, budget));
  }
  for (int step = 0; step < 4; ++step) s.decode_step(*press);
  for (int h = 0; h < GetParam(); ++h) EXPECT_EQ(s.cache().head(0, h).size(), budget + 4) << "no decode eviction";
}

// ---- PyramidKV ----

// SnapKV's reference: window queries' attention summed, group mean, max-pooled (kernel 7) over
// the prefix; the window scores +inf.
std::vector<double> snapkv_reference(const FakeSession& s, int layer, int kv_head, int64_t n, int64_t window) {
  const std::vector<double> votes = group_mean_column_sums(s, layer, kv_head, n, n - window);
  std::vector<double> pooled(n, INFINITY);
  for (int64_t i = 0; i < n - window; ++i) {
    pooled[i] = -INFINITY;
    for (int64_t j = std::max<int64_t>(0, i - 3); j <= std::min(n - window - 1, i + 3); ++j)
      pooled[i] = std::max(pooled[i], votes[j]);
  }
  return pooled;
}

// L = 4, B = 64, w = 8: b = 56, min = 2.8, max = 109.2, layers 109.2, 73.73, 38.27, 2.8;
// floors 109, 73, 38, 2 leave 2 for the largest fractions (layer 3: .8, layer 1: .73).
TEST_P(PressScores, PyramidKvPerLayerBudgetsAreHandComputed) {
  const int64_t n = 200, budget = 64, window = 8;
  FakeSession s(config(4), n, budget);
  const auto press = make_press("pyramidkv", {"window=8"});
  s.prefill(*press, 64);
  const int64_t want_counts[4] = {109 + 8, 74 + 8, 38 + 8, 3 + 8};
  int64_t total = 0;
  for (int l = 0; l < 4; ++l)
    for (int h = 0; h < GetParam(); ++h) {
      const std::vector<int64_t> kept = s.positions(l, h);
      EXPECT_EQ(int64_t(kept.size()), want_counts[l]) << "layer " << l;
      EXPECT_EQ(kept, top_k(snapkv_reference(s, l, h, n, window), want_counts[l])) << "layer " << l << " head " << h;
      total += int64_t(kept.size());
    }
  EXPECT_EQ(total, 4 * budget * GetParam());  // L * B per KV head
}

TEST_P(PressScores, PyramidKvLayerBudgetBeyondThePrefixKeepsEverythingAndSmallBudgetsKeepTheLast) {
  {
    const int64_t n = 100;  // layer 0's 117 exceed the prompt
    FakeSession s(config(4), n, 64);
    const auto press = make_press("pyramidkv", {"window=8"});
    s.prefill(*press, 100);
    const int64_t want_counts[4] = {100, 82, 46, 11};
    for (int l = 0; l < 4; ++l) EXPECT_EQ(s.cache().head(l, 0).size(), want_counts[l]) << "layer " << l;
  }
  {
    FakeSession s(config(4), 50, 6);  // budget 6 <= window 8
    const auto press = make_press("pyramidkv", {"window=8"});
    s.prefill(*press, 50);
    for (int l = 0; l < 4; ++l) EXPECT_EQ(s.positions(l, 0), (std::vector<int64_t>{44, 45, 46, 47, 48, 49}));
  }
}

TEST(PressPyramidKv, BetaOneIsUniformSnapKv) {
  const int64_t n = 90, budget = 30;
  FakeSession a(make_config(3, 4, 2), n, budget), b(make_config(3, 4, 2), n, budget);
  const auto pyramid = make_press("pyramidkv", {"beta=1", "window=8"});
  const auto snapkv = make_press("snapkv", {"window=8"});
  a.prefill(*pyramid, 32);
  b.prefill(*snapkv, 32);
  for (int l = 0; l < 3; ++l)
    for (int h = 0; h < 2; ++h) EXPECT_EQ(a.positions(l, h), b.positions(l, h));
}

// ---- AdaKV ----

// knorm scores -|k|: head 1's keys are 20x longer, so all its scores lose to head 0's and it
// keeps only its floor floor(0.2 * 20) = 4; head 0 takes the other 36 of the layer's 2 * 20.
TEST(PressAdaKv, HeadsGetUnequalCountsWithTheFloorRespected) {
  const int64_t n = 50, budget = 20;
  FakeSession s(make_config(2, 4, 2), n, budget);
  s.key_scale = {1.0f, 20.0f};
  const auto press = make_press("adakv:knorm", {});
  s.prefill(*press, 50);
  for (int l = 0; l < 2; ++l) {
    for (int h = 0; h < 2; ++h) {
      std::vector<double> neg_norm(n);
      for (int64_t j = 0; j < n; ++j) neg_norm[j] = -std::sqrt(dot(s.key_at(l, j, h), s.key_at(l, j, h)));
      EXPECT_EQ(s.positions(l, h), top_k(neg_norm, h == 0 ? 36 : 4)) << "layer " << l << " head " << h;
    }
  }
}

TEST_P(PressScores, AdaKvSelectsTheJointTopWithAFloorAndKeepsTheWindow) {
  const int64_t n = 120, budget = 30, window = 8, floor_count = 6;
  const int kv_heads = GetParam();
  FakeSession s(config(), n, budget);
  const auto press = make_press("adakv", {"inner=window=8"});
  s.prefill(*press, 32);
  bool unequal = false;
  for (int l = 0; l < 2; ++l) {
    // Reference: per head the top `floor` by SnapKV score, then the best of the rest jointly.
    std::vector<std::vector<double>> scores(kv_heads);
    std::vector<std::vector<int64_t>> want(kv_heads);
    struct Entry {
      double score;
      int64_t index;
      int head;
    };
    std::vector<Entry> rest;
    for (int h = 0; h < kv_heads; ++h) {
      scores[h] = snapkv_reference(s, l, h, n, window);
      want[h] = top_k(scores[h], floor_count);
      for (int64_t j = 0; j < n; ++j)
        if (!std::binary_search(want[h].begin(), want[h].end(), j)) rest.push_back({scores[h][j], j, h});
    }
    std::stable_sort(rest.begin(), rest.end(), [](const Entry& a, const Entry& b) {
      return a.score != b.score ? a.score > b.score : a.index != b.index ? a.index < b.index : a.head < b.head;
    });
    for (int64_t i = 0; i < kv_heads * (budget - floor_count); ++i) want[rest[i].head].push_back(rest[i].index);
    int64_t layer_total = 0;
    for (int h = 0; h < kv_heads; ++h) {
      std::sort(want[h].begin(), want[h].end());
      const std::vector<int64_t> kept = s.positions(l, h);
      EXPECT_EQ(kept, want[h]) << "layer " << l << " head " << h;
      EXPECT_GE(int64_t(kept.size()), std::max(floor_count, window));
      for (int64_t j = n - window; j < n; ++j) EXPECT_TRUE(std::binary_search(kept.begin(), kept.end(), j));
      unequal = unequal || int64_t(kept.size()) != budget;
      layer_total += int64_t(kept.size());
    }
    EXPECT_EQ(layer_total, kv_heads * budget);
  }
  if (kv_heads > 1) {
    EXPECT_TRUE(unequal) << "every head kept exactly the budget";
  }
}

TEST(PressAdaKv, BudgetWithinTheWindowKeepsTheLastTokens) {
  FakeSession s(make_config(1, 4, 2), 40, 5);
  const auto press = make_press("adakv:snapkv", {"inner=window=8"});
  s.prefill(*press, 40);
  for (int h = 0; h < 2; ++h) EXPECT_EQ(s.positions(0, h), (std::vector<int64_t>{35, 36, 37, 38, 39}));
}

TEST(PressAdaKv, OnlyScoreBasedMethodsCanBeWrapped) {
  EXPECT_THROW(make_press("adakv:streaming_llm", {}), Error);
  EXPECT_THROW(make_press("adakv:nonexistent", {}), Error);
  EXPECT_THROW(make_press("adakv:adakv", {}), Error);
  EXPECT_THROW(make_press("adakv", {"inner=bogus=1"}), Error);
  EXPECT_THROW(make_press("adakv", {"floor=1.5"}), Error);
  EXPECT_NO_THROW(make_press("adakv:h2o", {"inner=recent=0.25"}));
}

// ---- KeyDiff ----

struct KeyDiffVariant {
  std::string anchor = "mean", metric = "cosine";
  double recent = 0;
};

// Scores of `keys` as the spec states them: -cos(k_i, anchor) or -k_i.anchor, anchor the mean or
// element-wise median of the normalised keys; the newest floor(recent * budget) score +inf.
std::vector<double> keydiff_reference(const std::vector<const float*>& keys, const KeyDiffVariant& v, int64_t budget) {
  const size_t n = keys.size();
  std::vector<std::vector<double>> unit(n, std::vector<double>(kHeadDim));
  for (size_t i = 0; i < n; ++i) {
    const double norm = std::sqrt(dot(keys[i], keys[i]));
    for (int c = 0; c < kHeadDim; ++c) unit[i][c] = keys[i][c] / norm;
  }
  std::vector<double> anchor(kHeadDim);
  for (int c = 0; c < kHeadDim; ++c) {
    std::vector<double> column;
    for (size_t i = 0; i < n; ++i) column.push_back(unit[i][c]);
    std::sort(column.begin(), column.end());
    anchor[c] = v.anchor == "mean" ? std::accumulate(column.begin(), column.end(), 0.0) / n
                : n % 2            ? column[n / 2]
                                   : (column[n / 2 - 1] + column[n / 2]) / 2;
  }
  double anchor_norm = 0;
  for (double a : anchor) anchor_norm += a * a;
  anchor_norm = std::sqrt(anchor_norm);
  std::vector<double> scores(n);
  for (size_t i = 0; i < n; ++i) {
    double d = 0;
    for (int c = 0; c < kHeadDim; ++c) d += (v.metric == "dot" ? double(keys[i][c]) : unit[i][c]) * anchor[c];
    scores[i] = v.metric == "dot" ? -d : -d / anchor_norm;
  }
  const int64_t forced = int64_t(std::floor(v.recent * double(budget)));
  for (size_t i = n - std::min<size_t>(n, forced); i < n; ++i) scores[i] = INFINITY;
  return scores;
}

// The anchor form ranks like the pairwise form -sum_j cos(k_i, k_j): same kept set.
TEST_P(PressScores, KeyDiffAnchorScoreKeepsWhatThePairwiseFormKeeps) {
  const int64_t n = 60, budget = 20;
  FakeSession s(config(), n, budget);
  const auto press = make_press("keydiff", {});
  const auto filler = make_press("full", {});
  s.begin(*press);
  s.prefill_blocks(*filler, 60);  // the whole prompt cached, nothing evicted yet
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < GetParam(); ++h) {
      std::vector<const float*> keys;
      for (int64_t j = 0; j < n; ++j) keys.push_back(s.key_at(l, j, h));
      expect_scores(as_scorer(*press).score(s, l, h), keydiff_reference(keys, {}, budget));
    }
  s.end_prefill(*press);
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < GetParam(); ++h) {
      std::vector<double> pairwise(n, 0.0);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) {
          const float *a = s.key_at(l, i, h), *b = s.key_at(l, j, h);
          pairwise[i] -= dot(a, b) / std::sqrt(dot(a, a) * dot(b, b));
        }
      EXPECT_EQ(s.positions(l, h), top_k(pairwise, budget)) << "layer " << l << " head " << h;
    }
}

class PressKeyDiffVariants : public ::testing::TestWithParam<KeyDiffVariant> {};

// Block prefill (blocks of 8) and decode (blocks of 1) against a reference that scores
// cache + block and keeps the top budget after each block.
TEST_P(PressKeyDiffVariants, BlockPrefillAndDecodeFollowTheReference) {
  const KeyDiffVariant v = GetParam();
  const int64_t n = 75, budget = 15;
  const int steps = 6;
  FakeSession s(make_config(2, 4, 2), n, budget, steps);
  const auto press = make_press(
      "keydiff", {"block=8", "anchor=" + v.anchor, "metric=" + v.metric, "recent=" + std::to_string(v.recent)});
  s.prefill(*press, press->prefill_block());
  for (int step = 0; step < steps; ++step) s.decode_step(*press);
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 2; ++h) {
      std::vector<int64_t> kept;
      auto add_and_evict = [&](int64_t from, int64_t to) {
        for (int64_t p = from; p < to; ++p) kept.push_back(p);
        if (int64_t(kept.size()) <= budget) return;
        std::vector<const float*> keys;
        for (int64_t p : kept) keys.push_back(s.key_at(l, p, h));
        std::vector<int64_t> next;
        for (int64_t i : top_k(keydiff_reference(keys, v, budget), budget)) next.push_back(kept[i]);
        kept = next;
      };
      for (int64_t start = 0; start < n; start += 8) add_and_evict(start, std::min(n, start + 8));
      for (int step = 0; step < steps; ++step) add_and_evict(n + step, n + step + 1);
      EXPECT_EQ(s.positions(l, h), kept) << "layer " << l << " head " << h;
      std::vector<const float*> keys;
      for (int64_t p : kept) keys.push_back(s.key_at(l, p, h));
      expect_scores(as_scorer(*press).score(s, l, h), keydiff_reference(keys, v, budget));
    }
}

INSTANTIATE_TEST_SUITE_P(Variants, PressKeyDiffVariants,
                         ::testing::Values(KeyDiffVariant{}, KeyDiffVariant{"median", "cosine", 0.0},
                                           KeyDiffVariant{"mean", "cosine", 0.2}, KeyDiffVariant{"mean", "dot", 0.1},
                                           KeyDiffVariant{"median", "dot", 0.2}),
                         [](const auto& info) {
                           return info.param.anchor + "_" + info.param.metric + "_recent" +
                                  std::to_string(int(info.param.recent * 10));
                         });

// Forwards every hook to a press and records the largest head it ever sees (right after each
// block's forward pass, before the press evicts, is when the cache is largest).
class PeakWatcher final : public ForwardingPress {
 public:
  using ForwardingPress::ForwardingPress;
  void after_prefill_block(PressContext& ctx) override {
    observe(ctx);
    ++blocks;
    ForwardingPress::after_prefill_block(ctx);
    evicted_to_budget = evicted_to_budget && largest(ctx) <= ctx.budget();
  }
  void after_decode_step(PressContext& ctx) override {
    observe(ctx);
    ForwardingPress::after_decode_step(ctx);
  }

  int64_t peak = 0;
  int blocks = 0;
  bool evicted_to_budget = true;

 private:
  static int64_t largest(PressContext& ctx) {
    int64_t m = 0;
    for (int l = 0; l < ctx.cache().n_layers(); ++l) m = std::max(m, ctx.cache().n_tokens(l));
    return m;
  }
  void observe(PressContext& ctx) { peak = std::max(peak, largest(ctx)); }
};

TEST(PressKeyDiff, BlockPrefillOfAPrompt16TimesTheBudgetHoldsAtMostBudgetPlusBlock) {
  for (int kv_heads : {4, 2, 1}) {
    testing::TinyModel m;
    m.kv_heads = kv_heads;
    const auto model = Model::load(testing::make_model(m));
    const int64_t budget = 16, block = 16, n = 16 * budget;
    const int n_decode = 5;
    ThreadPool pool(2);
    EngineOptions options;  // --batch 512: the engine lowers it to the method's block
    const auto keydiff = make_press("keydiff", {"block=16"});
    PeakWatcher watcher(*keydiff);
    Session session(*model, pool,
                    {.engine = options,
                     .capacity = n + n_decode,
                     .press = &watcher,
                     .budget = budget,
                     .n_predict = n_decode,
                     .seed = 1});
    std::vector<int32_t> prompt(n);
    for (int64_t i = 0; i < n; ++i) prompt[i] = int32_t(3 + (i * 29) % 200);
    const float* logits = session.prefill(prompt);
    for (int i = 0; i < n_decode; ++i)
      logits = session.decode(int32_t(std::max_element(logits, logits + model->config().n_vocab) - logits));
    EXPECT_EQ(watcher.blocks, 16);
    EXPECT_TRUE(watcher.evicted_to_budget) << "a block ended above the budget";
    EXPECT_EQ(watcher.peak, budget + block) << "kv heads " << kv_heads;
    for (int l = 0; l < session.kv().n_layers(); ++l)
      for (int h = 0; h < kv_heads; ++h) EXPECT_EQ(session.kv().head(l, h).size(), budget);
  }
}

// ---- page types ----

// Scores on f16 and bf16 pages against the f64 references over the keys the pages hold (the
// rows rounded through the type): attention-based scores (H2O's column sums, TOVA's last row,
// SnapKV's window votes) and key-based ones (KNorm, KeyDiff), within the f32 bound (1e-5
// relative). q8_0 needs head_dim 32 (these fixtures use 16); its attention is checked in
// test_kv_cache.cpp.
TEST(PressScoresPageTypes, ScoresFollowTheStoredKeys) {
  const int64_t n = 45, budget = 14;
  const ModelConfig c = make_config(2, 4, 2);
  for (DType t : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(t));
    {
      FakeSession s(c, n, budget, 0, 11, t);
      const auto press = make_press("h2o", {});
      s.begin(*press);
      s.prefill_blocks(*press, 16);
      for (int l = 0; l < 2; ++l)
        for (int h = 0; h < 2; ++h) {
          std::vector<double> want = group_mean_column_sums(s, l, h, n, 0);
          for (int64_t j = n - 7; j < n; ++j) want[j] = INFINITY;
          expect_scores(as_scorer(*press).score(s, l, h), want);
        }
    }
    {
      FakeSession s(c, n, budget, 0, 12, t);
      const auto press = make_press("tova", {});
      s.begin(*press);
      s.prefill_blocks(*press, 16);
      for (int l = 0; l < 2; ++l)
        for (int h = 0; h < 2; ++h)
          expect_scores(as_scorer(*press).score(s, l, h), group_mean_column_sums(s, l, h, n, n - 1));
    }
    {
      FakeSession s(c, n, budget, 0, 13, t);
      const auto press = make_press("snapkv", {"window=8", "pooling=none"});
      s.begin(*press);
      s.prefill_blocks(*press, 16);
      for (int l = 0; l < 2; ++l)
        for (int h = 0; h < 2; ++h) {
          std::vector<double> want = group_mean_column_sums(s, l, h, n, n - 8);
          for (int64_t j = n - 8; j < n; ++j) want[j] = INFINITY;
          expect_scores(as_scorer(*press).score(s, l, h), want);
        }
    }
    {
      FakeSession s(c, n, budget, 0, 14, t);
      const auto knorm = make_press("knorm", {}), keydiff = make_press("keydiff", {});
      const auto filler = make_press("full", {});
      s.begin(*filler);
      s.prefill_blocks(*filler, 45);
      for (int l = 0; l < 2; ++l)
        for (int h = 0; h < 2; ++h) {
          std::vector<const float*> keys;
          std::vector<double> norms;
          for (int64_t j = 0; j < n; ++j) {
            keys.push_back(s.key_at(l, j, h));
            norms.push_back(-std::sqrt(dot(keys.back(), keys.back())));
          }
          expect_scores(as_scorer(*knorm).score(s, l, h), norms);
          expect_scores(as_scorer(*keydiff).score(s, l, h), keydiff_reference(keys, {}, budget));
        }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(GroupSizes, PressScores, ::testing::Values(4, 2, 1),
                         [](const auto& info) { return "G" + std::to_string(4 / info.param); });

}  // namespace
}  // namespace kvslim
