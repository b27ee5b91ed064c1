// Block-wise prefill eviction (prefill=block, --prefill-evict block) on a real session with a tiny
// random model: for every method that has it, a head never holds more than budget + block tokens
// (peak accounting at every block and in the page pool), the prompt ends within the budget, and
// the rules that are decomposable (KNorm's per-token score, StreamingLLM's sinks + window) keep
// exactly the tokens the end-of-prefill eviction keeps. Also: KV page types on whole sessions
// (kept-set agreement of f16 with f32 pages, threads 1 vs 2).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/session.h"
#include "model/model.h"
#include "press/forwarding_press.h"
#include "press/registry.h"
#include "test_lookahead_adapter.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim {
namespace {

constexpr int kBlock = 32;
constexpr int64_t kBudget = 40;
constexpr int kPrompt = 230;

const Model& tiny_model() { return testing::loaded_tiny_model(); }

std::vector<int32_t> prompt_tokens(int n, int n_vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[size_t(i)] = 3 + (i * 37 + 11) % (n_vocab - 3);
  return t;
}

// Forwards every hook to the method and records, at the start of each after_prefill_block (the
// moment a head is largest: the block appended, nothing evicted yet), every head's size.
class Watch final : public ForwardingPress {
 public:
  using ForwardingPress::ForwardingPress;
  void after_prefill_block(PressContext& ctx) override {
    PagedKvCache& c = ctx.cache();
    int64_t total = 0;
    for (int l = 0; l < c.n_layers(); ++l) {
      int64_t layer = 0;
      for (int h = 0; h < c.n_kv_heads(); ++h) {
        largest_head = std::max(largest_head, c.head(l, h).size());
        layer += c.head(l, h).size();
      }
      largest_layer = std::max(largest_layer, layer);
      total += layer;
    }
    largest_total = std::max(largest_total, total);
    ++blocks;
    ForwardingPress::after_prefill_block(ctx);
  }

  int64_t largest_head = 0, largest_layer = 0, largest_total = 0;
  int blocks = 0;
};

struct Prefilled {
  int64_t largest_head = 0, largest_layer = 0, largest_total = 0;  // at the blocks' ends, before eviction
  int64_t peak_tokens = 0;                                         // the page pool's peak (pages of 1 token)
  std::vector<std::vector<int64_t>> positions;                     // [layer * kv heads + head] kept after prefill
  std::vector<float> logits;
};

// The tiny model's shape with 128 dimensions: head_dim 32, a whole q8_0 block per head row, so
// every page type runs on it (q8_0 pages need head_dim % 32 == 0; the tiny model's is 16).
const Model& head_dim_32_model() {
  static const std::unique_ptr<Model> model = Model::load(testing::make_model({.dim = 128}));
  return *model;
}

Prefilled prefill(const std::string& method, std::vector<std::string> options, const std::string& prefill_evict,
                  DType page_type = DType::F16, int threads = 2, const Model& model = tiny_model()) {
  CompressionOptions compression;
  compression.press = method;
  compression.press_options = std::move(options);
  compression.prefill_evict = parse_prefill_evict(prefill_evict);
  EngineOptions engine;
  engine.batch = kBlock;
  engine.page_tokens = 1;  // the pool's pages count tokens exactly
  engine.cache_type_k = engine.cache_type_v = page_type;
  ThreadPool pool(threads);
  Watch watch(compression.make_press());
  Session session(
      model, pool,
      {.engine = engine, .capacity = kPrompt, .press = &watch, .budget = kBudget, .n_predict = 0, .seed = 1});
  const float* logits = session.prefill(prompt_tokens(kPrompt, model.config().n_vocab));
  Prefilled r;
  r.largest_head = watch.largest_head;
  r.largest_total = watch.largest_total;
  r.largest_layer = watch.largest_layer;
  r.peak_tokens = int64_t(session.kv().peak_bytes() / session.kv().pool().page_bytes());
  r.logits.assign(logits, logits + model.config().n_vocab);
  const PagedKvCache& kv = session.kv();
  for (int l = 0; l < kv.n_layers(); ++l)
    for (int h = 0; h < kv.n_kv_heads(); ++h) {
      r.positions.emplace_back();
      for (int64_t i = 0; i < kv.head(l, h).size(); ++i) r.positions.back().push_back(kv.head(l, h).position(i));
    }
  return r;
}

struct Method {
  std::string name;
  std::vector<std::string> options;
  int64_t extra_rows = 0;  // rows a method appends to score (DapQ's pseudo tokens, LookaheadKV's rows)
};

std::vector<Method> block_methods() {
  const std::string adapter = testing::random_adapter_path(tiny_model(), {8, 4, 16});
  return {{"snapkv", {}},       {"pyramidkv", {}},
          {"adakv", {}},        {"adakv:h2o", {}},
          {"h2o", {}},          {"tova", {}},
          {"knorm", {}},        {"streaming_llm", {}},
          {"dapq", {}, 4 + 28}, {"lookaheadkv", {"adapter=" + adapter}, 8}};
}

// Every method the registry says evicts block-wise through its option runs in the tests below.
TEST(BlockPrefill, EveryMethodWithTheOptionIsTested) {
  std::set<std::string> tested;
  for (const Method& m : block_methods()) tested.insert(m.name);
  for (const PressInfo& info : press_registry())
    if (info.can.block_eviction == BlockEviction::Option) {
      EXPECT_TRUE(tested.count(info.name)) << info.name;
    }
}

TEST(BlockPrefill, EveryMethodHoldsAtMostBudgetPlusBlockPerHead) {
  const int heads = 2 * 2;  // layers * KV heads
  for (const Method& m : block_methods()) {
    SCOPED_TRACE(m.name);
    const Prefilled block = prefill(m.name, m.options, "block");
    const Prefilled end = prefill(m.name, m.options, "end");
    // End of prefill: every head held the whole prompt.
    EXPECT_EQ(end.largest_head, kPrompt);
    EXPECT_GE(end.peak_tokens, heads * kPrompt);
    // Block-wise: PyramidKV's layers have their own budgets (summing to L * budget), so its bound
    // is on the layers together; AdaKV shares a layer's budget among its heads, so its bound is
    // on each layer; every other method bounds each head.
    const BudgetRule rule = PressSpec::parse(m.name).can().budget_rule;
    if (rule == BudgetRule::PerHead) {
      EXPECT_LE(block.largest_head, kBudget + kBlock);
    }
    if (rule != BudgetRule::PerModel) {
      EXPECT_LE(block.largest_layer, 2 * (kBudget + kBlock));
    }
    EXPECT_LE(block.largest_total, heads * (kBudget + kBlock));
    EXPECT_GT(block.largest_total, heads * kBudget);  // it did run over the budget between evictions
    EXPECT_LE(block.peak_tokens, heads * (kBudget + kBlock + m.extra_rows));
    int64_t kept = 0;
    for (const auto& p : block.positions) {
      if (rule == BudgetRule::PerHead) {
        EXPECT_LE(int64_t(p.size()), kBudget);
      }
      kept += int64_t(p.size());
      EXPECT_TRUE(std::is_sorted(p.begin(), p.end()));
    }
    EXPECT_LE(kept, heads * kBudget);
    EXPECT_GT(kept, heads * kBudget / 2);
  }
}

TEST(BlockPrefill, DecomposableRulesKeepWhatTheEndOfPrefillKeeps) {
  // StreamingLLM's window slides: the same positions in every layer. KNorm: a token among the
  // top `budget` of the whole prompt is among the top of every subset that holds it, so block by
  // block ends with the same set -- in layer 0, whose keys do not depend on attention (later
  // layers' keys do, and block-wise eviction changes what earlier tokens attended to).
  EXPECT_EQ(prefill("streaming_llm", {}, "block").positions, prefill("streaming_llm", {}, "end").positions);
  const Prefilled block = prefill("knorm", {}, "block"), end = prefill("knorm", {}, "end");
  for (int h = 0; h < 2; ++h) EXPECT_EQ(block.positions[size_t(h)], end.positions[size_t(h)]) << "layer 0 head " << h;
  EXPECT_NE(block.positions, end.positions) << "layer 1 keys should depend on the evictions";
}

TEST(BlockPrefill, MethodsWithoutABlockRuleRefuse) {
  CompressionOptions c;
  c.prefill_evict = PrefillEvict::Block;
  for (const char* method : {"quest", "full", "rocketkv", "laq", "lagkv", "random"}) {
    c.press = method;
    EXPECT_THROW(c.make_press(), Error) << method;
  }
  c.press = "keydiff";  // block-wise by design
  EXPECT_NO_THROW(c.make_press());
  EXPECT_THROW(parse_prefill_evict("sometimes"), Error);
  EXPECT_THROW(make_press("snapkv", {"prefill=sometimes"}), Error);
}

// ---- page types on whole sessions ----

// Fraction of f32's kept tokens that f16 pages keep too, over every head of the methods' kept
// sets on the fixed prompt. Bound: >= 0.9 for each method (f16's relative rounding 2^-11 moves
// only near-tied scores across the cut).
TEST(KvPageTypes, F16KeptSetsAgreeWithF32) {
  std::vector<Method> methods = block_methods();
  methods.push_back({"keydiff", {}});
  methods.push_back({"lagkv", {}});
  double worst = 1;
  for (const Method& m : methods) {
    const Prefilled f32 = prefill(m.name, m.options, "end", DType::F32);
    const Prefilled f16 = prefill(m.name, m.options, "end", DType::F16);
    EXPECT_NE(f32.logits, f16.logits) << "the pages should round";
    int64_t same = 0, total = 0;
    for (size_t h = 0; h < f32.positions.size(); ++h) {
      const std::set<int64_t> a(f32.positions[h].begin(), f32.positions[h].end());
      for (int64_t p : f16.positions[h]) same += a.count(p);
      total += int64_t(a.size());
    }
    const double agreement = double(same) / double(total);
    std::printf("[ kept     ] %-14s f16 vs f32 pages: %.4f of the kept tokens agree\n", m.name.c_str(), agreement);
    EXPECT_GE(agreement, 0.9) << m.name;
    worst = std::min(worst, agreement);
  }
  std::printf("[ kept     ] worst agreement %.4f\n", worst);
}

TEST(KvPageTypes, ThreadsOneAndTwoAreBitIdenticalOnEveryType) {
  const Model& model = head_dim_32_model();
  ASSERT_EQ(model.config().head_dim, 32);
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
    for (const char* method : {"snapkv", "h2o", "full"}) {
      SCOPED_TRACE(std::string(method) + " " + dtype_name(t));
      const Prefilled one = prefill(method, {}, "end", t, 1, model), two = prefill(method, {}, "end", t, 2, model);
      EXPECT_EQ(one.logits, two.logits);
      EXPECT_EQ(one.positions, two.positions);
    }
  }
}

}  // namespace
}  // namespace kvslim
