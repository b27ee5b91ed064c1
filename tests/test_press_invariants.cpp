// Invariants every registered method must hold (issue: "For all methods"): budget covering the
// whole request is bit-identical to `full`; kept tokens within the method's budget rule; sinks
// and windows kept; deterministic for a seed; GQA group sizes 1, 2, 4; KV bytes shrink with
// the budget. The rule each method is held to is the one its PressInfo declares (budget_rule).
#include <gtest/gtest.h>

#include <map>

#include "engine/session.h"
#include "model/model.h"
#include "press/registry.h"
#include "test_lookahead_adapter.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim {
namespace {

// How a method's kept-token count relates to the budget B after prefill: its PressInfo's
// budget rule, which the tests below hold the method to.
using Rule = BudgetRule;

Rule budget_rule(const std::string& method) { return PressSpec::parse(method).can().budget_rule; }

// Options a method cannot run without: lookaheadkv's adapter, made here for the model at hand.
std::vector<std::string> required_options(const std::string& method, const Model& model) {
  if (method == "lookaheadkv") return {"adapter=" + testing::random_adapter_path(model)};
  return {};
}

struct Outcome {
  std::vector<int32_t> tokens;             // greedy continuation
  std::vector<std::vector<float>> logits;  // prompt's last, then each decode step's
  std::vector<std::vector<int64_t>> kept;  // positions per (layer, KV head) after prefill
  uint64_t kv_bytes_after_prefill = 0;
};

std::vector<int32_t> prompt_tokens(int n, int n_vocab) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = 3 + (i * 53 + 7) % (n_vocab - 3);
  return t;
}

Outcome run(const Model& model, const std::string& method, int64_t budget, int n_prompt, int n_predict,
            int batch = 16) {
  ThreadPool pool(2);
  EngineOptions options;
  options.batch = batch;
  options.page_tokens = 8;  // fine pages, so that KV bytes follow small budgets
  const auto press = make_press(method, required_options(method, model));
  const auto prompt = prompt_tokens(n_prompt, model.config().n_vocab);
  Session session(model, pool,
                  {.engine = options,
                   .capacity = n_prompt + n_predict,
                   .press = press.get(),
                   .budget = budget,
                   .n_predict = n_predict,
                   .seed = 5});
  Outcome r;
  const int n_vocab = model.config().n_vocab;
  const float* logits = session.prefill(prompt);
  r.kv_bytes_after_prefill = session.kv().bytes_in_use();
  for (int l = 0; l < session.kv().n_layers(); ++l)
    for (int h = 0; h < session.kv().n_kv_heads(); ++h) {
      const HeadCache& head = session.kv().head(l, h);
      std::vector<int64_t> positions;
      for (int64_t i = 0; i < head.size(); ++i) positions.push_back(head.position(i));
      r.kept.push_back(positions);
    }
  for (int i = 0; i < n_predict; ++i) {
    r.logits.emplace_back(logits, logits + n_vocab);
    const int32_t token = int32_t(std::max_element(logits, logits + n_vocab) - logits);
    r.tokens.push_back(token);
    if (i + 1 < n_predict) logits = session.decode(token);
  }
  return r;
}

// The suite runs every method on a llama model and on one model of each other architecture, named
// before the method ("gemma3:snapkv"): gemma3, whose layers 0 and 2 are sliding-window layers of
// kSlidingWindow tokens that no method governs and layers 1 and 3 global; phi3 (fused projections,
// partial RoPE with LongRoPE factors); smollm3 (its fourth layer has no RoPE); qwen3moe (8 experts,
// 2 per token: the FFN changes, attention does not); gpt-oss (8 experts with biases, attention
// sinks in every softmax, YaRN, layers 0 and 2 sliding over kSlidingWindow tokens).
constexpr int kSlidingWindow = 16;
Arch arch_of(const std::string& param) {
  const size_t colon = param.find(':');
  return colon == std::string::npos ? Arch::Llama : arch_from_name(param.substr(0, colon));
}
std::string method_of(const std::string& param) {
  const size_t colon = param.find(':');
  return colon == std::string::npos ? param : param.substr(colon + 1);
}

std::string model_path(int kv_heads, Arch arch = Arch::Llama) {
  testing::TinyModel m;
  m.heads = 4;
  m.kv_heads = kv_heads;
  m.layers = 3;
  m.arch = arch;
  if (arch != Arch::Llama) m.layers = 4;
  if (arch == Arch::Gemma3) {
    m.window = kSlidingWindow;
    m.swa_period = 2;
  }
  if (arch == Arch::GptOss) m.window = kSlidingWindow;  // its even layers
  return testing::make_model(m);
}

std::vector<std::string> registered_methods() {
  std::vector<std::string> names;
  for (const auto& info : press_registry()) names.push_back(info.name);
  return names;
}

class PressInvariants : public ::testing::TestWithParam<std::string> {};

// The rule is declared with the method; one that evicts nothing cannot evict block by block or
// be ranked by adakv either.
TEST_P(PressInvariants, EveryMethodHasABudgetRule) {
  const PressCapabilities& can = PressSpec::parse(method_of(GetParam())).can();
  EXPECT_FALSE(budget_rule_name(can.budget_rule).empty());
  if (can.budget_rule == Rule::NoEviction) {
    EXPECT_EQ(can.block_eviction, BlockEviction::None) << method_of(GetParam());
    EXPECT_FALSE(can.adakv_wraps) << method_of(GetParam());
  }
}

TEST_P(PressInvariants, BudgetCoveringTheRequestIsIdenticalToFull) {
  const auto model = Model::load(model_path(2, arch_of(GetParam())));
  const int n_prompt = 70, n_predict = 5;
  const Outcome full = run(*model, "full", kNoBudget, n_prompt, n_predict);
  const Outcome r = run(*model, method_of(GetParam()), n_prompt + n_predict, n_prompt, n_predict);
  EXPECT_EQ(r.tokens, full.tokens);
  EXPECT_EQ(r.logits, full.logits);  // bit-identical
  EXPECT_EQ(r.kept, full.kept);
}

TEST_P(PressInvariants, KeptTokensFollowTheBudgetRule) {
  const Rule rule = budget_rule(method_of(GetParam()));
  for (int kv_heads : {4, 2, 1}) {  // GQA group sizes 1, 2, 4
    const auto model = Model::load(model_path(kv_heads, arch_of(GetParam())));
    const int64_t budget = 40, n_prompt = 150;
    const Outcome r = run(*model, method_of(GetParam()), budget, n_prompt, 3);
    int layers = 0;  // the governed (global) layers
    int64_t total = 0;
    for (int l = 0; l < model->config().n_layers; ++l) {
      if (model->config().is_local_layer(l)) {
        // A sliding-window layer holds the window the next token sees, whatever the method.
        for (int h = 0; h < kv_heads; ++h) {
          std::vector<int64_t> want;
          for (int64_t p = n_prompt - kSlidingWindow + 1; p < n_prompt; ++p) want.push_back(p);
          EXPECT_EQ(r.kept[l * kv_heads + h], want) << "local layer " << l << " head " << h;
        }
        continue;
      }
      ++layers;
      int64_t layer_total = 0;
      for (int h = 0; h < kv_heads; ++h) {
        const auto& kept = r.kept[l * kv_heads + h];
        EXPECT_TRUE(std::is_sorted(kept.begin(), kept.end())) << "layer " << l << " head " << h;
        EXPECT_TRUE(std::adjacent_find(kept.begin(), kept.end()) == kept.end()) << "duplicate position";
        if (rule == Rule::PerHead) {
          EXPECT_LE(int64_t(kept.size()), budget) << "layer " << l << " head " << h;
        }
        if (rule == Rule::NoEviction) {
          EXPECT_EQ(int64_t(kept.size()), n_prompt);
        }
        layer_total += int64_t(kept.size());
      }
      if (rule == Rule::PerLayer) {
        EXPECT_LE(layer_total, kv_heads * budget) << "layer " << l;
      }
      total += layer_total;
    }
    if (rule == Rule::PerModel) {
      EXPECT_LE(total, layers * kv_heads * budget);
    }
    if (rule == Rule::PerHead || rule == Rule::PerLayer || rule == Rule::PerModel) {
      EXPECT_LT(total, int64_t(layers) * kv_heads * n_prompt) << "nothing evicted";
    }
  }
}

TEST_P(PressInvariants, DeterministicForASeed) {
  const auto model = Model::load(model_path(2, arch_of(GetParam())));
  const std::string method = method_of(GetParam());
  const Outcome a = run(*model, method, 32, 120, 6), b = run(*model, method, 32, 120, 6);
  EXPECT_EQ(a.kept, b.kept);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.logits, b.logits);
}

TEST_P(PressInvariants, KvBytesShrinkWithTheBudget) {
  const Rule rule = budget_rule(method_of(GetParam()));
  if (rule == Rule::NoEviction || rule == Rule::OwnSchedule) GTEST_SKIP() << "budget does not set storage";
  const auto model = Model::load(model_path(2, arch_of(GetParam())));
  const std::string method = method_of(GetParam());
  const Outcome small = run(*model, method, 24, 200, 2), large = run(*model, method, 96, 200, 2),
                full = run(*model, "full", kNoBudget, 200, 2);
  EXPECT_LT(small.kv_bytes_after_prefill, large.kv_bytes_after_prefill);
  EXPECT_LT(large.kv_bytes_after_prefill, full.kv_bytes_after_prefill);
}

INSTANTIATE_TEST_SUITE_P(AllMethods, PressInvariants, ::testing::ValuesIn(registered_methods()),
                         [](const auto& info) { return info.param; });

std::vector<std::string> registered_methods_on(const std::string& arch) {
  std::vector<std::string> params;
  for (const std::string& name : registered_methods()) params.push_back(arch + ":" + name);
  return params;
}

INSTANTIATE_TEST_SUITE_P(AllMethodsOnGemma3, PressInvariants, ::testing::ValuesIn(registered_methods_on("gemma3")),
                         [](const auto& info) { return method_of(info.param); });
INSTANTIATE_TEST_SUITE_P(AllMethodsOnPhi3, PressInvariants, ::testing::ValuesIn(registered_methods_on("phi3")),
                         [](const auto& info) { return method_of(info.param); });
INSTANTIATE_TEST_SUITE_P(AllMethodsOnSmolLM3, PressInvariants, ::testing::ValuesIn(registered_methods_on("smollm3")),
                         [](const auto& info) { return method_of(info.param); });
INSTANTIATE_TEST_SUITE_P(AllMethodsOnQwen3Moe, PressInvariants, ::testing::ValuesIn(registered_methods_on("qwen3moe")),
                         [](const auto& info) { return method_of(info.param); });
INSTANTIATE_TEST_SUITE_P(AllMethodsOnGptOss, PressInvariants, ::testing::ValuesIn(registered_methods_on("gpt-oss")),
                         [](const auto& info) { return method_of(info.param); });

TEST(PressRegistry, UnknownMethodListsTheValidOnes) {
  try {
    make_press("no_such_method", {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("snapkv"), std::string::npos) << e.what();
  }
}

TEST(PressRegistry, UnknownOptionListsTheValidOnes) {
  try {
    make_press("snapkv", {"windw=4"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("window"), std::string::npos) << e.what();
  }
}

TEST(PressRegistry, OutOfRangeOptionsAreRefused) {
  EXPECT_THROW(make_press("snapkv", {"window=0"}), Error);
  EXPECT_THROW(make_press("snapkv", {"kernel=4"}), Error);
  EXPECT_THROW(make_press("snapkv", {"window"}), Error);
  EXPECT_THROW(make_press("snapkv", {})->check_budget(16), Error);  // window 32 > budget 16
}

}  // namespace
}  // namespace kvslim

namespace kvslim {
namespace {

std::vector<int64_t> range(int64_t from, int64_t to) {
  std::vector<int64_t> r;
  for (int64_t i = from; i < to; ++i) r.push_back(i);
  return r;
}

TEST(PressWindows, StreamingLlmKeepsSinksAndTheMostRecent) {
  const auto model = Model::load(model_path(2));
  const Outcome r = run(*model, "streaming_llm", 20, 100, 1);
  std::vector<int64_t> want = range(0, 4);
  for (int64_t p : range(84, 100)) want.push_back(p);
  for (const auto& kept : r.kept) EXPECT_EQ(kept, want);
}

TEST(PressWindows, SnapKvKeepsTheWindow) {
  const auto model = Model::load(model_path(2));
  const Outcome r = run(*model, "snapkv", 40, 100, 1);
  for (const auto& kept : r.kept) {
    ASSERT_EQ(kept.size(), 40u);
    EXPECT_EQ(std::vector<int64_t>(kept.end() - 32, kept.end()), range(68, 100));
  }
}

}  // namespace
}  // namespace kvslim
