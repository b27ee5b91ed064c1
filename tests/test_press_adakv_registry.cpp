// AdaKV over the whole registry (issue 14 item 1): every method AdaKV accepts runs unchanged
// inside it (its probes, block ends, appended rows, decode steps), so on the same model and prompt
//  - the scores AdaKV ranks at its first eviction equal the inner method's own scores there, and
//  - after every hook each layer holds exactly as many tokens as the inner method keeps in that
//    layer (AdaKV only moves tokens between the heads of a layer), which fails when a hook is
//    lost: KeyDiff's block evictions, H2O/TOVA/KeyDiff's decode evictions;
// and a method AdaKV cannot wrap is refused with an error naming it.
#include <gtest/gtest.h>

#include <set>

#include "engine/session.h"
#include "model/model.h"
#include "press/forwarding_press.h"
#include "press/registry.h"
#include "press/scorer_press.h"
#include "test_lookahead_adapter.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim {
namespace {

// The registry says which methods adakv wraps (PressCapabilities::adakv_wraps); the rest, and
// adakv itself, it must refuse. EveryMethodIsClassified holds the flag to what each method is.
std::set<std::string> methods_where(bool wraps) {
  std::set<std::string> names;
  for (const PressInfo& info : press_registry())
    if (info.can.adakv_wraps == wraps) names.insert(info.name);
  return names;
}
const std::set<std::string> kWrappable = methods_where(true);
const std::set<std::string> kRefused = methods_where(false);

// Forwards every hook to the method under test and notes, after each hook, each layer's token
// total and the first scores recorded per (layer, KV head).
class HookRecorder final : public ForwardingPress {
 public:
  explicit HookRecorder(Press& inner) : ForwardingPress(inner) {}
  void attach(const Session& session) { session_ = &session; }

  void after_prefill_block(PressContext& ctx) override { ForwardingPress::after_prefill_block(ctx), note(); }
  void end_prefill(PressContext& ctx) override { ForwardingPress::end_prefill(ctx), note(); }
  void after_extend(PressContext& ctx) override { ForwardingPress::after_extend(ctx), note(); }
  void after_decode_step(PressContext& ctx) override { ForwardingPress::after_decode_step(ctx), note(); }

  std::vector<std::vector<int64_t>> layer_totals;  // [hook][layer]
  std::vector<std::vector<float>> first_scores;    // [layer * kv_heads + head]

 private:
  void note() {
    const PagedKvCache& kv = session_->kv();
    std::vector<int64_t> totals(kv.n_layers(), 0);
    first_scores.resize(size_t(kv.n_layers()) * kv.n_kv_heads());
    for (int l = 0; l < kv.n_layers(); ++l)
      for (int h = 0; h < kv.n_kv_heads(); ++h) {
        totals[l] += kv.head(l, h).size();
        auto& first = first_scores[size_t(l) * kv.n_kv_heads() + h];
        if (first.empty()) first = session_->recorded_scores(l, h);
      }
    layer_totals.push_back(totals);
  }

  const Session* session_ = nullptr;
};

constexpr int64_t kPrompt = 160, kBudget = 48;  // budget above SnapKV's window (32): no head is all forced
constexpr int kDecode = 6;

HookRecorder run(const Model& model, Press& press) {
  ThreadPool pool(2);
  EngineOptions options;
  options.batch = 512;  // KeyDiff lowers it to its block
  HookRecorder recorder(press);
  Session session(model, pool,
                  {.engine = options,
                   .capacity = kPrompt + kDecode + 1,
                   .press = &recorder,
                   .budget = kBudget,
                   .n_predict = kDecode,
                   .seed = 1});
  recorder.attach(session);
  session.record_scores();
  std::vector<int32_t> prompt(kPrompt);
  for (int64_t i = 0; i < kPrompt; ++i) prompt[i] = int32_t(3 + (i * 41 + 5) % 200);
  session.prefill(prompt);
  for (int i = 0; i < kDecode; ++i) session.decode(int32_t(10 + 7 * i));  // the same tokens in both runs
  return recorder;
}

// The inner method's options, given directly or through adakv's `inner=`.
std::vector<std::string> options_of(const std::string& method, const Model& model) {
  if (method == "lookaheadkv") return {"adapter=" + testing::random_adapter_path(model)};
  if (method == "keydiff") return {"block=64"};  // three prefill blocks: evictions between them
  return {};
}

// Independently of the flag: adakv can wrap exactly the methods that score every token (the
// score-based ones), and never itself.
TEST(PressAdaKvRegistry, EveryMethodIsClassified) {
  const auto model = Model::load(testing::make_model({}));
  for (const PressInfo& info : press_registry()) {
    const auto press = make_press(info.name, options_of(info.name, *model));
    const bool scores = dynamic_cast<ScorerPress*>(press.get()) != nullptr;
    EXPECT_EQ(info.can.adakv_wraps, scores && info.name != "adakv") << info.name << ": adakv_wraps in its PressInfo";
  }
  EXPECT_TRUE(kWrappable.count("snapkv") && kRefused.count("adakv") && kRefused.count("streaming_llm"));
}

TEST(PressAdaKvRegistry, RefusesMethodsWithoutScoresByName) {
  for (const std::string& name : kRefused) {
    try {
      make_press("adakv:" + name, {});
      ADD_FAILURE() << "adakv accepted " << name;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'" + name + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(PressAdaKvRegistry, RanksTheInnerScoresAndRunsEveryHook) {
  const auto model = Model::load(testing::make_model({}));
  for (const std::string& name : kWrappable) {
    SCOPED_TRACE(name);
    const std::vector<std::string> opts = options_of(name, *model);
    std::string inner_list;
    for (const std::string& o : opts) inner_list += (inner_list.empty() ? "" : ",") + o;
    const auto plain = make_press(name, opts);
    const auto wrapped =
        make_press("adakv:" + name,
                   inner_list.empty() ? std::vector<std::string>{} : std::vector<std::string>{"inner=" + inner_list});
    const HookRecorder a = run(*model, *plain), b = run(*model, *wrapped);

    ASSERT_EQ(a.first_scores.size(), b.first_scores.size());
    for (size_t i = 0; i < a.first_scores.size(); ++i) {
      ASSERT_FALSE(a.first_scores[i].empty()) << "head " << i << " never scored";
      EXPECT_EQ(a.first_scores[i], b.first_scores[i]) << "head " << i;
      // Not a degenerate ranking (all zeros was the bug for dapq and lookaheadkv).
      const auto [lo, hi] = std::minmax_element(a.first_scores[i].begin(), a.first_scores[i].end());
      if (name != "random") {
        EXPECT_LT(*lo, *hi) << "head " << i << ": every score equal";
      }
    }
    EXPECT_EQ(a.layer_totals, b.layer_totals) << "a hook of the inner method did not run inside adakv";
  }
}

}  // namespace
}  // namespace kvslim
