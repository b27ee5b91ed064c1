// Decode-time sparse attention (exact_topk, quest, sparq, rocketkv) and the page summaries they
// share: each selection against a plain double-precision reference written here, on random
// keys in a PagedKvCache driven through a small fake PressContext; Quest's bound; the RocketKV
// budget split against a table computed by hand; stage 2 with p=1, r=d is Exact-TopK; a k that
// covers the cache is dense attention on a real tiny model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "engine/session.h"
#include "model/model.h"
#include "press/page_bounds.h"
#include "press/registry.h"
#include "press/methods/rocketkv_plan.h"
#include "fake_press_context.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim {
namespace {

constexpr int kHeadDim = 16;
constexpr int kKvHeads = 2;

// An f32 page's key in place (these fixtures store f32 pages).
const float* head_key(const HeadCache& head, int64_t i) { return head.key_f32(i, nullptr); }

ModelConfig config_for(int group, int layers = 2, int head_dim = kHeadDim) {
  ModelConfig c;
  c.n_layers = layers;
  c.n_kv_heads = kKvHeads;
  c.n_heads = kKvHeads * group;
  c.head_dim = head_dim;
  c.n_rot = head_dim;
  c.dim = c.n_heads * head_dim;
  c.ffn_dim = c.dim;
  c.n_vocab = 32;
  c.context_length = 4096;
  return c;
}

// Just enough of a session: a cache the test fills by hand, the budget and the request's size.
class FakeContext final : public testing::FakePressContext {
 public:
  FakeContext(const ModelConfig& config, int64_t capacity, int64_t budget, int64_t n_prompt, int n_predict)
      : FakePressContext(config, {.capacity = capacity,
                                  .page_tokens = 8,
                                  .budget = budget,
                                  .prompt = std::vector<int32_t>(size_t(n_prompt), 5),
                                  .n_predict = n_predict}) {}

  // Appends n random tokens to every layer at the next positions.
  void append_random(int64_t n, std::mt19937& rng) {
    std::normal_distribution<float> normal;
    const size_t width = size_t(config_.kv_dim());
    std::vector<float> k(n * width), v(n * width);
    std::vector<int64_t> positions(n);
    std::iota(positions.begin(), positions.end(), n_past_);
    for (int l = 0; l < config_.n_layers; ++l) {
      for (float& x : k) x = normal(rng);
      for (float& x : v) x = normal(rng);
      cache_.append(l, k.data(), v.data(), int(n), positions.data());
    }
    n_past_ += n;
  }
};

std::vector<float> random_queries(const ModelConfig& c, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  std::vector<float> q(size_t(c.n_heads) * c.head_dim);
  for (float& x : q) x = normal(rng);
  return q;
}

// Runs the press's selector for one layer; an empty result means "dense".
std::vector<std::vector<int32_t>> select(Press& press, PressContext& ctx, int layer, const std::vector<float>& q) {
  std::vector<std::vector<int32_t>> selected;
  SparseSelector* selector = press.sparse_selector();
  static ThreadPool pool(2);  // heads are selected in parallel
  if (!selector || !selector->select(layer, q.data(), ctx.cache(), selected, pool)) return {};
  return selected;
}

// ---- references, in double ----

double dot_ref(const float* a, const float* b, int d) {
  double s = 0;
  for (int c = 0; c < d; ++c) s += double(a[c]) * b[c];
  return s;
}

void add_softmax_ref(const std::vector<double>& logits, double weight, std::vector<double>& acc) {
  const double m = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (double l : logits) sum += std::exp(l - m);
  for (size_t j = 0; j < logits.size(); ++j) acc[j] += weight * std::exp(logits[j] - m) / sum;
}

// The k best (ties: lower index) with the last index forced, ascending.
std::vector<int32_t> top_k_newest_ref(std::vector<double> scores, int64_t k) {
  scores.back() = std::numeric_limits<double>::infinity();
  std::vector<int32_t> idx(scores.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return scores[a] > scores[b]; });
  idx.resize(std::min<size_t>(k, idx.size()));
  std::sort(idx.begin(), idx.end());
  return idx;
}

std::vector<int32_t> exact_topk_ref(const HeadCache& head, const float* q_group, int group, int d, int64_t k) {
  const int64_t n = head.size();
  std::vector<double> mean(n, 0.0), logits(n);
  for (int g = 0; g < group; ++g) {
    for (int64_t j = 0; j < n; ++j) logits[j] = dot_ref(q_group + g * d, head_key(head, j), d) / std::sqrt(double(d));
    add_softmax_ref(logits, 1.0 / group, mean);
  }
  return top_k_newest_ref(mean, k);
}

struct PageMinMax {
  std::vector<double> min, max;
};

// Brute-force per-channel min and max of the keys at slots [begin, end) of `indices`.
PageMinMax page_min_max(const HeadCache& head, const std::vector<int32_t>& indices, int64_t begin, int64_t end, int d) {
  PageMinMax p{std::vector<double>(d, INFINITY), std::vector<double>(d, -INFINITY)};
  for (int64_t s = begin; s < end; ++s)
    for (int c = 0; c < d; ++c) {
      p.min[c] = std::min(p.min[c], double(head_key(head, indices[s])[c]));
      p.max[c] = std::max(p.max[c], double(head_key(head, indices[s])[c]));
    }
  return p;
}

std::vector<int32_t> quest_ref(const HeadCache& head, const float* q_group, int group, int d, int page,
                               int64_t n_pages) {
  const int64_t n = head.size(), pages = (n + page - 1) / page;
  std::vector<int32_t> all(n);
  std::iota(all.begin(), all.end(), 0);
  std::vector<double> bound(pages, 0.0);
  for (int64_t p = 0; p < pages; ++p) {
    const PageMinMax mm = page_min_max(head, all, p * page, std::min(n, (p + 1) * page), d);
    for (int g = 0; g < group; ++g)
      for (int c = 0; c < d; ++c) {
        const double q = q_group[g * d + c];
        bound[p] += std::max(q * mm.min[c], q * mm.max[c]);
      }
  }
  std::vector<int32_t> tokens;
  for (int32_t p : top_k_newest_ref(bound, n_pages))
    for (int64_t i = int64_t(p) * page; i < std::min(n, int64_t(p + 1) * page); ++i) tokens.push_back(int32_t(i));
  return tokens;
}

// Channels of largest Σ_group |q_i| (random data: no ties), ascending.
std::vector<int> channels_ref(const float* q_group, int group, int d, int r) {
  std::vector<double> w(d, 0.0);
  for (int g = 0; g < group; ++g)
    for (int c = 0; c < d; ++c) w[c] += std::abs(q_group[g * d + c]);
  std::vector<int> ch(d);
  std::iota(ch.begin(), ch.end(), 0);
  std::stable_sort(ch.begin(), ch.end(), [&](int a, int b) { return w[a] > w[b]; });
  ch.resize(r);
  std::sort(ch.begin(), ch.end());
  return ch;
}

double temperature_ref(const float* q, const std::vector<int>& channels, int d) {
  double sel = 0, all = 0;
  for (int c : channels) sel += std::abs(q[c]);
  for (int c = 0; c < d; ++c) all += std::abs(q[c]);
  return std::sqrt(d * sel / all);
}

std::vector<int32_t> sparq_ref(const HeadCache& head, const float* q_group, int group, int d, int r, int64_t k) {
  const int64_t n = head.size();
  const std::vector<int> channels = channels_ref(q_group, group, d, r);
  std::vector<double> mean(n, 0.0), logits(n);
  for (int g = 0; g < group; ++g) {
    const float* q = q_group + g * d;
    const double t = temperature_ref(q, channels, d);
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int c : channels) s += double(q[c]) * head_key(head, j)[c];
      logits[j] = s / t;
    }
    add_softmax_ref(logits, 1.0 / group, mean);
  }
  return top_k_newest_ref(mean, k);
}

// RocketKV stage 2 over the cache slots `indices` (ascending cache indices); returns cache indices.
std::vector<int32_t> hybrid_ref(const HeadCache& head, const std::vector<int32_t>& indices, const float* q_group,
                                int group, int d, int page, int r, int64_t k) {
  const int64_t n = int64_t(indices.size()), pages = (n + page - 1) / page;
  const std::vector<int> channels = channels_ref(q_group, group, d, r);
  std::vector<PageMinMax> mm;
  for (int64_t p = 0; p < pages; ++p)
    mm.push_back(page_min_max(head, indices, p * page, std::min(n, (p + 1) * page), d));
  std::vector<double> mean(n, 0.0), logits(n);
  for (int g = 0; g < group; ++g) {
    const float* q = q_group + g * d;
    const double t = temperature_ref(q, channels, d);
    for (int64_t s = 0; s < n; ++s) {
      double logit = 0;
      for (int c : channels) {
        double group_sum = 0;
        for (int h = 0; h < group; ++h) group_sum += q_group[h * d + c];
        logit += q[c] * (group_sum > 0 ? mm[s / page].max[c] : mm[s / page].min[c]);
      }
      logits[s] = logit / t;
    }
    add_softmax_ref(logits, 1.0 / group, mean);
  }
  std::vector<int32_t> out;
  for (int32_t s : top_k_newest_ref(mean, k)) out.push_back(indices[s]);
  return out;
}

std::vector<int32_t> all_of(const HeadCache& head) {
  std::vector<int32_t> all(head.size());
  std::iota(all.begin(), all.end(), 0);
  return all;
}

// ---- page summaries ----

void expect_bounds_match(const PageBounds& b, const HeadCache& head, const std::vector<int32_t>& indices, int d) {
  const int64_t n = int64_t(indices.size()), page = b.page_tokens();
  ASSERT_EQ(b.n_tokens(), n);
  ASSERT_EQ(b.n_pages(), (n + page - 1) / page);
  for (int64_t p = 0; p < b.n_pages(); ++p) {
    const PageMinMax mm = page_min_max(head, indices, p * page, std::min(n, (p + 1) * page), d);
    for (int c = 0; c < d; ++c) {
      ASSERT_EQ(b.min_channel(c)[p], float(mm.min[c])) << "page " << p << " channel " << c;
      ASSERT_EQ(b.max_channel(c)[p], float(mm.max[c])) << "page " << p << " channel " << c;
    }
  }
}

TEST(PressSparsePageBounds, FollowAppendsEvictionsAndViews) {
  std::mt19937 rng(1);
  FakeContext ctx(config_for(1, 1), 200, 1000, 60, 0);
  ctx.append_random(37, rng);
  HeadCache& head = ctx.cache().head(0, 1);
  PageBounds b;
  b.reset(5, kHeadDim);
  b.sync(head);
  expect_bounds_match(b, head, all_of(head), kHeadDim);
  for (int step = 0; step < 4; ++step) {  // decode: one token at a time, folded incrementally
    ctx.append_random(1, rng);
    b.sync(head);
    expect_bounds_match(b, head, all_of(head), kHeadDim);
  }
  // Evict tokens, then append so the size is back where it was: the summaries must be rebuilt.
  std::vector<int32_t> keep;
  for (int32_t i = 0; i < int32_t(head.size()); ++i)
    if (i % 3 != 1) keep.push_back(i);
  const int64_t before = head.size();
  ctx.keep(0, 1, keep);
  ctx.append_random(before - head.size(), rng);
  b.sync(head);
  expect_bounds_match(b, head, all_of(head), kHeadDim);
  ctx.keep(0, 1, std::vector<int32_t>{0, 4, 9});
  b.sync(head);
  expect_bounds_match(b, head, all_of(head), kHeadDim);

  // A view: chosen prompt slots, then everything from cache index 10 on.
  const std::vector<int32_t> prefix = {1, 2, 6};
  ctx.append_random(20, rng);
  PageBounds v;
  v.reset(4, kHeadDim);
  v.sync(head, TokenView{prefix, 10});
  std::vector<int32_t> slots = prefix;
  for (int32_t i = 10; i < int32_t(head.size()); ++i) slots.push_back(i);
  expect_bounds_match(v, head, slots, kHeadDim);

  // Reused for another head width (its arrays are laid out per channel), then for this one again.
  v.reset(4, kHeadDim / 2);
  v.reset(3, kHeadDim);
  v.sync(head);
  expect_bounds_match(v, head, all_of(head), kHeadDim);
}

TEST(PressSparsePageBounds, QuestBoundIsAtLeastEveryLogitOfItsPage) {
  std::mt19937 rng(2);
  for (int page : {1, 3, 16}) {
    FakeContext ctx(config_for(4, 1), 200, 1000, 100, 0);
    ctx.append_random(100, rng);
    for (int h = 0; h < kKvHeads; ++h) {
      const HeadCache& head = ctx.cache().head(0, h);
      PageBounds b;
      b.reset(page, kHeadDim);
      b.sync(head);
      for (int trial = 0; trial < 5; ++trial) {
        const std::vector<float> q = random_queries(ctx.config(), rng);
        for (int qh = 0; qh < ctx.config().n_heads; ++qh) {
          std::vector<float> bounds(size_t(b.n_pages()));
          page_logit_bounds(b, &q[qh * kHeadDim], bounds.data());
          for (int64_t p = 0; p < b.n_pages(); ++p) {
            const float bound = bounds[size_t(p)];
            double max_logit = -INFINITY, scale = 0;
            for (int64_t i = p * page; i < std::min<int64_t>(head.size(), (p + 1) * page); ++i) {
              max_logit = std::max(max_logit, dot_ref(&q[qh * kHeadDim], head_key(head, i), kHeadDim));
              for (int c = 0; c < kHeadDim; ++c) scale += std::abs(q[qh * kHeadDim + c] * head_key(head, i)[c]);
            }
            EXPECT_GE(double(bound), max_logit - 1e-6 * scale) << "page size " << page << " page " << p;
            if (page == 1) {
              EXPECT_NEAR(double(bound), max_logit, 1e-5 * scale);  // one key: the bound is exact
            }
          }
        }
      }
    }
  }
}

// ---- selections against the references, GQA group sizes 1, 2, 4 ----

class PressSparseGroups : public ::testing::TestWithParam<int> {
 protected:
  int group() const { return GetParam(); }

  // Fills a cache of n tokens, begins the press and compares its selection for several random
  // decode queries (each after appending one token) with `reference(head, q_group)`; checks
  // that at most `limit` tokens are read, ascending, newest included; that an identical press
  // selects the same. Returns how many heads read a subset.
  template <class Reference>
  int check(const std::string& method, const std::vector<std::string>& options, int64_t budget, int64_t limit,
            Reference reference, int64_t n = 90) {
    std::mt19937 rng(10 + group());
    FakeContext ctx(config_for(group()), 400, budget, n, 10);
    ctx.append_random(n, rng);
    const auto press = make_press(method, options), twin = make_press(method, options);
    press->begin(ctx);
    press->end_prefill(ctx);
    twin->begin(ctx);
    twin->end_prefill(ctx);
    int sparse_heads = 0;
    for (int step = 0; step < 4; ++step) {
      ctx.append_random(1, rng);
      const std::vector<float> q = random_queries(ctx.config(), rng);
      for (int layer = 0; layer < ctx.config().n_layers; ++layer) {
        const auto selected = select(*press, ctx, layer, q);
        EXPECT_EQ(selected, select(*twin, ctx, layer, q)) << "not deterministic";
        if (selected.empty()) continue;
        for (int h = 0; h < kKvHeads; ++h) {
          const HeadCache& head = ctx.cache().head(layer, h);
          const std::vector<int32_t>& s = selected[h];
          EXPECT_LE(int64_t(s.size()), limit);
          EXPECT_TRUE(std::adjacent_find(s.begin(), s.end(), std::greater_equal<int32_t>()) == s.end());
          if (s.empty()) {
            ADD_FAILURE() << "empty selection";
            continue;
          }
          EXPECT_EQ(s.back(), head.size() - 1) << "the newest token must be read";
          EXPECT_EQ(s, reference(head, &q[size_t(h) * group() * kHeadDim])) << "layer " << layer << " head " << h;
          sparse_heads += int64_t(s.size()) < head.size();
        }
      }
    }
    return sparse_heads;
  }
};

TEST_P(PressSparseGroups, ExactTopKReadsTheTopKOfTheExactGroupMeanAttention) {
  const int g = group();
  const int64_t budget = 24;
  EXPECT_GT(check("exact_topk", {}, budget, budget,
                  [&](const HeadCache& head, const float* q) { return exact_topk_ref(head, q, g, kHeadDim, budget); }),
            0);
  EXPECT_GT(check("exact_topk", {"k=7"}, budget, 7,
                  [&](const HeadCache& head, const float* q) { return exact_topk_ref(head, q, g, kHeadDim, 7); }),
            0);
}

TEST_P(PressSparseGroups, QuestReadsTheTopPagesByGroupBound) {
  const int g = group();
  // floor(30/4) = 7 pages of 4 tokens: at most 28 tokens.
  EXPECT_GT(check("quest", {"page=4"}, 30, 28,
                  [&](const HeadCache& head, const float* q) { return quest_ref(head, q, g, kHeadDim, 4, 7); }),
            0);
  EXPECT_GT(check("quest", {}, 40, 32,  // default page 16: 2 pages
                  [&](const HeadCache& head, const float* q) { return quest_ref(head, q, g, kHeadDim, 16, 2); }),
            0);
}

TEST_P(PressSparseGroups, SparqReadsTheTopKOfTheApproximateAttention) {
  const int g = group();
  EXPECT_GT(check("sparq", {}, 20, 20,  // defaults: r = head_dim/4 = 4, k = budget
                  [&](const HeadCache& head, const float* q) { return sparq_ref(head, q, g, kHeadDim, 4, 20); }),
            0);
  EXPECT_GT(check("sparq", {"r=10", "k=9"}, 20, 9,
                  [&](const HeadCache& head, const float* q) { return sparq_ref(head, q, g, kHeadDim, 10, 9); }),
            0);
}

TEST_P(PressSparseGroups, RocketKvStageTwoMatchesTheHybridReference) {
  const int g = group();
  // Stage 1 keeps everything (prompt_budget >= n): stage 2 alone, over the whole cache.
  for (auto [page, r, k] : {std::tuple{4, 8, 12}, {3, 5, 20}, {1, 16, 10}}) {
    const std::vector<std::string> options = {"prompt_budget=1000", fmt::format("page={}", page),
                                              fmt::format("channels={}", r), fmt::format("top_k={}", k)};
    EXPECT_GT(check("rocketkv", options, 2 * k, k,
                    [&](const HeadCache& head, const float* q) {
                      return hybrid_ref(head, all_of(head), q, g, kHeadDim, page, r, k);
                    }),
              0);
  }
}

TEST_P(PressSparseGroups, RocketKvStageTwoWithSingleTokenPagesAndAllChannelsIsExactTopK) {
  const int64_t k = 16;
  std::mt19937 rng(20 + group());
  FakeContext ctx(config_for(group()), 400, 2 * k, 120, 10);
  ctx.append_random(120, rng);
  const auto rocket = make_press("rocketkv", {"prompt_budget=1000", "page=1", fmt::format("channels={}", kHeadDim)});
  const auto exact = make_press("exact_topk", {fmt::format("k={}", k)});
  rocket->begin(ctx);
  rocket->end_prefill(ctx);
  exact->begin(ctx);
  for (int step = 0; step < 5; ++step) {
    ctx.append_random(1, rng);
    const std::vector<float> q = random_queries(ctx.config(), rng);
    for (int layer = 0; layer < ctx.config().n_layers; ++layer) {
      const auto r = select(*rocket, ctx, layer, q);
      ASSERT_EQ(r.size(), size_t(kKvHeads));
      EXPECT_EQ(r, select(*exact, ctx, layer, q)) << "step " << step << " layer " << layer;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(PressSparse, PressSparseGroups, ::testing::Values(1, 2, 4));

// ---- dense when the step fits ----

TEST(PressSparse, AStepThatFitsInKReadsDensely) {
  // Budget 50: the step holding 50 tokens is dense, the next reads a subset (Quest: 3 pages of 16).
  const std::vector<std::tuple<std::string, std::vector<std::string>, size_t>> methods = {
      {"exact_topk", {}, 50},
      {"quest", {"page=5"}, 50},
      {"quest", {}, 48},
      {"sparq", {}, 50},
      {"rocketkv", {"prompt_budget=1000", "top_k=50"}, 50}};
  for (const auto& [method, options, limit] : methods) {
    std::mt19937 rng(3);
    FakeContext ctx(config_for(2), 400, 50, 49, 10);
    ctx.append_random(49, rng);
    const auto press = make_press(method, options);
    press->begin(ctx);
    press->end_prefill(ctx);
    ctx.append_random(1, rng);
    const std::vector<float> q = random_queries(ctx.config(), rng);
    EXPECT_TRUE(select(*press, ctx, 0, q).empty()) << method;
    ctx.append_random(1, rng);
    const auto selected = select(*press, ctx, 0, q);
    ASSERT_EQ(selected.size(), size_t(kKvHeads)) << method;
    EXPECT_LE(selected[0].size(), limit) << method;
  }
}

TEST(PressSparse, KCoveringTheCacheIsDenseAttentionOnATinyModel) {
  testing::TinyModel m;
  m.heads = 4;
  m.kv_heads = 2;
  const auto model = Model::load(testing::make_model(m));
  ThreadPool pool(2);
  const int n_vocab = model->config().n_vocab, n_prompt = 40, n_predict = 6;
  std::vector<int32_t> prompt(n_prompt);
  for (int i = 0; i < n_prompt; ++i) prompt[i] = 3 + (i * 37 + 11) % (n_vocab - 3);
  // Prompt logits then the logits of each decode step (greedy, the reference run's tokens).
  auto run = [&](Press* press, int64_t budget, const std::vector<int32_t>& feed) {
    Session session(*model, pool,
                    {.engine = EngineOptions{},
                     .capacity = n_prompt + n_predict,
                     .press = press,
                     .budget = budget,
                     .n_predict = n_predict});
    std::vector<std::vector<float>> logits;
    const float* l = session.prefill(prompt);
    logits.emplace_back(l, l + n_vocab);
    for (int32_t t : feed) {
      l = session.decode(t);
      logits.emplace_back(l, l + n_vocab);
    }
    return logits;
  };
  std::vector<int32_t> feed;
  for (int i = 0; i < n_predict; ++i) feed.push_back(3 + i * 5);
  const auto full = run(nullptr, kNoBudget, feed);
  for (const std::string k : {"0", "46", "100"}) {  // the budget, the most the cache holds, more
    const auto press = make_press("exact_topk", {"k=" + k});
    EXPECT_EQ(run(press.get(), n_prompt + n_predict, feed), full) << "k=" << k;
  }
  // A k below the cache size does change the output: the selection really is applied.
  const auto press = make_press("exact_topk", {"k=8"});
  const auto sparse = run(press.get(), n_prompt + n_predict, feed);
  EXPECT_EQ(sparse.front(), full.front());
  EXPECT_NE(sparse.back(), full.back());
}

// ---- RocketKV: budget split, accounting, stage 1, multi-turn ----

TEST(PressSparseRocketKv, BudgetSplitMatchesHandComputedTable) {
  struct Row {
    int64_t n_prompt, max_new, budget;
    RocketKvSplit split;
    int64_t prompt_budget;
    int page, channels;
    int64_t top_k;
  };
  const int d = 64;
  const Row rows[] = {
      // S = 4000+96 = 4096, c = 4096/256 = 16, α = 0.2 + 0.06*log2(16) = 0.2 + 0.24 = 0.44,
      // c^α = 2^(4*0.44) = 2^1.76 = 3.3870, S/c^α = 2^(12-1.76) = 2^10.24 = 1209.34 → 1209;
      // min(2*96, 4096) = 192 → N_cap = 1209, P = 1209 - 96 = 1113; c2 = 1209/256 = 4.7227,
      // sqrt = 2.173 → p = 3 (<= 4.72); r = floor(64*3/4.7227) = floor(40.66) = 40; k = 128.
      {4000, 96, 256, RocketKvSplit::Released, 1113, 3, 40, 128},
      // S = 1024+512 = 1536, c = 1536/120 = 12.8, log2 12.8 = 3.678, α = 0.2 + 0.2207 = 0.4207,
      // c^α = 2^(3.678*0.4207) = 2^1.547 = 2.923, S/c^α = 525.5 → 525 < min(1024, 1536) = 1024
      // → N_cap = 1024 (the 2*max_new floor), P = 1024 - 512 = 512; c2 = 1024/120 = 8.533,
      // sqrt = 2.921 → p = 3; r = floor(64*3/8.533) = floor(22.5) = 22; k = 60.
      {1024, 512, 120, RocketKvSplit::Released, 512, 3, 22, 60},
      // S = 2^20, c = 2^20/512 = 2048, log2 = 11, α = min(0.2 + 0.66, 0.8) = 0.8 (the cap),
      // c^α = 2^8.8, S/c^α = 2^11.2 = 2048*1.1487 = 2352.5 → 2352; min(0, S) = 0 → N_cap = 2352,
      // P = 2352; c2 = 2352/512 = 4.594, sqrt = 2.143 → p = 3; r = floor(192/4.594) = floor(41.8) = 41.
      {1 << 20, 0, 512, RocketKvSplit::Released, 2352, 3, 41, 256},
      // S = 2000, c = 2, α = 0.2 + 0.06 = 0.26, c^α = 2^0.26 = 1.1975, S/c^α = 1670.2 → 1670 = N_cap
      // = P; c2 = 1670/1000 = 1.67, ceil(sqrt 1.67 = 1.292) = 2 > 1.67 → p = 1;
      // r = floor(64/1.67) = floor(38.3) = 38; k = 500.
      {2000, 0, 1000, RocketKvSplit::Released, 1670, 1, 38, 500},
      // S = 32000+768 = 32768, c = 2048, α = 0.8, S/c^α = 2^(15-8.8) = 2^6.2 = 73.5 → 73 <
      // min(1536, 32768) → N_cap = 1536, P = 768; c2 = 1536/16 = 96, sqrt = 9.80 → p = 10;
      // r = floor(640/96) = floor(6.67) = 6; k = 8.
      {32000, 768, 16, RocketKvSplit::Released, 768, 10, 6, 8},
      // S = 300 <= B = 512: c = 1, α = 0.2, c^α = 1, N_cap = max(300, min(200, 300)) = 300,
      // P = 200 (the whole prompt); c2 = max(1, 300/512) = 1 → p = 1, r = 64; k = 256.
      {200, 100, 512, RocketKvSplit::Released, 200, 1, 64, 256},
      // Even split: α = 1/2. S = 4096, c = 16, c^α = 4, S/c^α = 1024 > 192 → N_cap = 1024,
      // P = 1024 - 96 = 928; c2 = 1024/256 = 4, sqrt = 2 → p = 2; r = 64*2/4 = 32; k = 128.
      {4000, 96, 256, RocketKvSplit::Even, 928, 2, 32, 128},
  };
  for (const Row& row : rows) {
    const RocketKvPlan plan = rocketkv_plan(row.n_prompt, row.max_new, row.budget, d, row.split);
    SCOPED_TRACE(fmt::format("n={} max_new={} B={}", row.n_prompt, row.max_new, row.budget));
    EXPECT_EQ(plan.prompt_budget, row.prompt_budget);
    EXPECT_EQ(plan.page, row.page);
    EXPECT_EQ(plan.channels, row.channels);
    EXPECT_EQ(plan.top_k, row.top_k);
  }
}

TEST(PressSparseRocketKv, StorageAndTrafficInTokenEquivalents) {
  // First row of the table: P = 1113, p = 3, r = 40, k = 128, d = 64. At N_cap = 1209 tokens:
  // pages = ceil(1209/3) = 403; storage = 1209 + 403 = 1612; traffic = 403*40/128 + 128 =
  // 125.9375 + 128 = 253.9375 <= B = 256.
  const RocketKvPlan plan = rocketkv_plan(4000, 96, 256, 64, RocketKvSplit::Released);
  EXPECT_DOUBLE_EQ(plan.storage_tokens(1209, 1209), 1612.0);
  EXPECT_DOUBLE_EQ(plan.traffic_tokens(1209, 64), 253.9375);
  EXPECT_DOUBLE_EQ(plan.traffic_tokens(100, 64), 34 * 40 / 128.0 + 100);  // fewer tokens than k
  // Whatever the request, a step over the N_cap = P + max_new tokens the plan allows reads about
  // B: pages*r/(2d) <= (N/p + 1) * (d*p/c2) / (2d) = B/2 + p/(2*c2) <= B/2 + 1, plus k = B/2.
  for (int d : {16, 64, 128})
    for (int64_t n : {100, 1000, 5000, 40000})
      for (int64_t max_new : {0, 10, 300})
        for (int64_t budget : {16, 64, 250, 1024})
          for (RocketKvSplit split : {RocketKvSplit::Released, RocketKvSplit::Even}) {
            const RocketKvPlan p = rocketkv_plan(n, max_new, budget, d, split);
            if (n + max_new <= budget) continue;  // no compression
            const int64_t n_cap = p.prompt_budget + max_new;
            EXPECT_LE(p.traffic_tokens(n_cap, d), budget + 1.0) << n << " " << max_new << " " << budget << " " << d;
            EXPECT_LE(p.prompt_budget, n);
          }
}

// Feeds random attention rows for every prompt query to the press's prefill probe and returns
// the SnapKV++ selection of the reference: window rows summed over the window and the group on
// the prefix, max-pooled, top (P - window) plus the window.
std::vector<std::vector<int32_t>> feed_votes_and_reference(Press& press, FakeContext& ctx, int window, int kernel,
                                                           int64_t prompt_budget, std::mt19937& rng) {
  const ModelConfig& c = ctx.config();
  const int64_t n = ctx.n_prompt(), prefix = n - window;
  const int group = c.group_size();
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  AttentionProbe* probe = press.prefill_probe();
  EXPECT_NE(probe, nullptr);
  std::vector<std::vector<int32_t>> expected;
  std::vector<std::vector<double>> sums(size_t(c.n_layers) * c.n_kv_heads, std::vector<double>(prefix, 0.0));
  for (int layer = 0; layer < c.n_layers; ++layer)
    for (int qh = 0; qh < c.n_heads; ++qh)
      for (int64_t pos = 0; pos < n; ++pos) {
        std::vector<float> row(pos + 1);
        for (float& x : row) x = uniform(rng);
        probe->on_row(layer, qh, pos, row.data(), pos + 1);
        if (pos >= prefix)
          for (int64_t j = 0; j < prefix; ++j) sums[size_t(layer) * c.n_kv_heads + qh / group][j] += row[j];
      }
  for (const auto& s : sums) {
    std::vector<double> pooled(prefix);
    for (int64_t i = 0; i < prefix; ++i)
      for (int64_t j = std::max<int64_t>(0, i - kernel / 2); j <= std::min(prefix - 1, i + kernel / 2); ++j)
        pooled[i] = std::max(pooled[i], s[j]);
    std::vector<int32_t> idx(prefix);
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return pooled[a] > pooled[b]; });
    idx.resize(prompt_budget - window);
    std::sort(idx.begin(), idx.end());
    for (int64_t i = prefix; i < n; ++i) idx.push_back(int32_t(i));
    expected.push_back(idx);
  }
  return expected;
}

TEST(PressSparseRocketKv, StageOneKeepsTheSnapKvPlusPlusSelection) {
  for (int group : {1, 2, 4}) {
    std::mt19937 rng(30 + group);
    const int64_t n = 120;
    FakeContext ctx(config_for(group), 300, 8, n, 10);
    ctx.append_random(n, rng);
    const auto press = make_press("rocketkv", {"window=8", "kernel=5", "prompt_budget=40"});
    press->begin(ctx);
    const auto expected = feed_votes_and_reference(*press, ctx, 8, 5, 40, rng);
    press->end_prefill(ctx);
    for (int layer = 0; layer < ctx.config().n_layers; ++layer)
      for (int h = 0; h < kKvHeads; ++h) {
        const HeadCache& head = ctx.cache().head(layer, h);
        std::vector<int32_t> kept;
        for (int64_t i = 0; i < head.size(); ++i) kept.push_back(int32_t(head.position(i)));
        EXPECT_EQ(kept, expected[size_t(layer) * kKvHeads + h]) << "group " << group << " layer " << layer;
      }
  }
}

TEST(PressSparseRocketKv, StageOneUsesTheLongKernelFromTheThreshold) {
  // kernel=1 (no pooling) below the threshold; at n >= threshold kernel_long=5 applies.
  std::mt19937 rng(40);
  const int64_t n = 120;
  FakeContext ctx(config_for(2), 300, 8, n, 10);
  ctx.append_random(n, rng);
  const auto press =
      make_press("rocketkv", {"window=8", "kernel=1", "kernel_long=5", "long_threshold=120", "prompt_budget=40"});
  press->begin(ctx);
  const auto expected = feed_votes_and_reference(*press, ctx, 8, 5, 40, rng);
  press->end_prefill(ctx);
  for (int layer = 0; layer < ctx.config().n_layers; ++layer)
    for (int h = 0; h < kKvHeads; ++h) {
      const HeadCache& head = ctx.cache().head(layer, h);
      std::vector<int32_t> kept;
      for (int64_t i = 0; i < head.size(); ++i) kept.push_back(int32_t(head.position(i)));
      EXPECT_EQ(kept, expected[size_t(layer) * kKvHeads + h]);
    }
}

TEST(PressSparseRocketKv, MultiTurnKeepsTheFullCacheAndDecodesOverTheWorkingSet) {
  for (int group : {1, 2, 4}) {
    std::mt19937 rng(50 + group);
    const int64_t n = 120;
    FakeContext ctx(config_for(group), 300, 8, n, 10);
    ctx.append_random(n, rng);
    const auto press = make_press(
        "rocketkv", {"window=8", "kernel=5", "prompt_budget=40", "page=3", "channels=6", "top_k=12", "mt=true"});
    press->begin(ctx);
    const auto working = feed_votes_and_reference(*press, ctx, 8, 5, 40, rng);
    press->end_prefill(ctx);
    for (int layer = 0; layer < ctx.config().n_layers; ++layer)
      for (int h = 0; h < kKvHeads; ++h) EXPECT_EQ(ctx.cache().head(layer, h).size(), n) << "mt evicts nothing";
    for (int step = 0; step < 3; ++step) {
      ctx.append_random(1, rng);
      const std::vector<float> q = random_queries(ctx.config(), rng);
      for (int layer = 0; layer < ctx.config().n_layers; ++layer) {
        const auto selected = select(*press, ctx, layer, q);
        ASSERT_EQ(selected.size(), size_t(kKvHeads));
        for (int h = 0; h < kKvHeads; ++h) {
          const HeadCache& head = ctx.cache().head(layer, h);
          std::vector<int32_t> view = working[size_t(layer) * kKvHeads + h];  // prompt positions = indices
          for (int32_t i = int32_t(n); i < int32_t(head.size()); ++i) view.push_back(i);
          EXPECT_EQ(selected[h], hybrid_ref(head, view, &q[size_t(h) * group * kHeadDim], group, kHeadDim, 3, 6, 12))
              << "group " << group << " layer " << layer << " head " << h;
        }
      }
    }
  }
}

TEST(PressSparseRocketKv, MultiTurnWithAWorkingSetSmallerThanKReadsAllOfIt) {
  std::mt19937 rng(60);
  const int64_t n = 60;
  FakeContext ctx(config_for(2), 300, 8, n, 10);
  ctx.append_random(n, rng);
  const auto press = make_press("rocketkv", {"window=4", "kernel=3", "prompt_budget=10", "top_k=30", "mt=true"});
  press->begin(ctx);
  const auto working = feed_votes_and_reference(*press, ctx, 4, 3, 10, rng);
  press->end_prefill(ctx);
  ctx.append_random(1, rng);
  const auto selected = select(*press, ctx, 1, random_queries(ctx.config(), rng));
  ASSERT_EQ(selected.size(), size_t(kKvHeads));
  for (int h = 0; h < kKvHeads; ++h) {
    std::vector<int32_t> view = working[size_t(kKvHeads) + h];
    view.push_back(int32_t(n));
    EXPECT_EQ(selected[h], view);
  }
}

TEST(PressSparseRocketKv, ARequestThatFitsTheBudgetIsNotCompressed) {
  FakeContext ctx(config_for(2), 300, 130, 120, 10);  // 120 + 10 <= 130
  std::mt19937 rng(70);
  ctx.append_random(120, rng);
  const auto press = make_press("rocketkv", {});
  press->begin(ctx);
  EXPECT_EQ(press->prefill_probe(), nullptr);
  press->end_prefill(ctx);
  EXPECT_EQ(press->sparse_selector(), nullptr);
  EXPECT_EQ(ctx.cache().head(0, 0).size(), 120);
}

TEST(PressSparseRocketKv, RunsOnATinyModelWithThePlannedStageOneBudget) {
  for (int kv_heads : {4, 2, 1}) {
    testing::TinyModel m;
    m.heads = 4;
    m.kv_heads = kv_heads;
    const auto model = Model::load(testing::make_model(m));
    ThreadPool pool(2);
    const int n_vocab = model->config().n_vocab, n_prompt = 300, n_predict = 8;
    const int64_t budget = 32;
    std::vector<int32_t> prompt(n_prompt);
    for (int i = 0; i < n_prompt; ++i) prompt[i] = 3 + (i * 37 + 11) % (n_vocab - 3);
    const RocketKvPlan plan =
        rocketkv_plan(n_prompt, n_predict, budget, model->config().head_dim, RocketKvSplit::Released);
    for (const std::string mt : {"false", "true"}) {
      auto generate_tokens = [&] {
        const auto press = make_press("rocketkv", {"mt=" + mt});
        Session session(*model, pool,
                        {.engine = EngineOptions{},
                         .capacity = n_prompt + n_predict,
                         .press = press.get(),
                         .budget = budget,
                         .n_predict = n_predict});
        const float* logits = session.prefill(prompt);
        for (int l = 0; l < session.kv().n_layers(); ++l)
          for (int h = 0; h < kv_heads; ++h)
            EXPECT_EQ(session.kv().head(l, h).size(), mt == "true" ? n_prompt : plan.prompt_budget);
        std::vector<int32_t> tokens;
        for (int i = 0; i < n_predict; ++i) {
          tokens.push_back(int32_t(std::max_element(logits, logits + n_vocab) - logits));
          logits = session.decode(tokens.back());
        }
        return tokens;
      };
      EXPECT_EQ(generate_tokens(), generate_tokens()) << "deterministic, mt=" << mt;
    }
  }
}

TEST(PressSparse, BadOptionsAndBudgetsAreNamedErrors) {
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { make_press("rocketkv", {"kernel=64"}); }).find("rocketkv: option kernel=64"),
            std::string::npos);
  EXPECT_NE(message([] { make_press("rocketkv", {"split=odd"}); }).find("split"), std::string::npos);
  EXPECT_NE(message([] { make_press("rocketkv", {})->check_budget(1); }).find("rocketkv"), std::string::npos);
  EXPECT_NE(message([] { make_press("quest", {"page=16"})->check_budget(15); }).find("quest"), std::string::npos);
  EXPECT_NE(message([] { make_press("sparq", {"r=-1"}); }).find("sparq: option r"), std::string::npos);
  EXPECT_NE(message([] { make_press("exact_topk", {"k=x"}); }).find("exact_topk: option k"), std::string::npos);
}

}  // namespace
}  // namespace kvslim
