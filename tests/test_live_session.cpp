// Sessions that live across turns (Session::feed_turn, LiveSession): `full` fed turn by turn is
// bit-identical to the whole conversation at once; each method's multi-turn rule
// (docs/conversations.md) checked against a direct computation; a conversation that rewrites its
// history re-prefills from the first differing token.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <numeric>

#include "engine/live_session.h"
#include "engine/session.h"
#include "model/model.h"
#include "press/registry.h"
#include "test_lookahead_adapter.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim {
namespace {

std::vector<int32_t> tokens(int n, int n_vocab, int salt = 0) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = 3 + (i * 37 + 11 + salt * 13) % (n_vocab - 3);
  return t;
}

std::vector<float> copy(const float* logits, int n) { return std::vector<float>(logits, logits + n); }

int32_t argmax(const std::vector<float>& v) { return int32_t(std::max_element(v.begin(), v.end()) - v.begin()); }

struct Fixture {
  std::unique_ptr<Model> model = Model::load(testing::make_model(testing::TinyModel{}));
  ThreadPool pool{2};
  EngineOptions options;
  int n_vocab() const { return model->config().n_vocab; }
};

std::vector<std::vector<int64_t>> kept_positions(const PagedKvCache& kv) {
  std::vector<std::vector<int64_t>> out;
  for (int l = 0; l < kv.n_layers(); ++l)
    for (int h = 0; h < kv.n_kv_heads(); ++h) {
      std::vector<int64_t> p;
      for (int64_t i = 0; i < kv.head(l, h).size(); ++i) p.push_back(kv.head(l, h).position(i));
      out.push_back(p);
    }
  return out;
}

// Turns of 16, 8 and 24 tokens with --batch 8: both sessions run the same blocks, so the
// arithmetic is the same and the logits must match bit for bit.
TEST(LiveSessionTurns, FullFedTurnByTurnIsBitIdenticalToTheWholeConversation) {
  Fixture f;
  f.options.batch = 8;
  const std::vector<std::vector<int32_t>> turns = {tokens(16, f.n_vocab(), 1), tokens(8, f.n_vocab(), 2),
                                                   tokens(24, f.n_vocab(), 3)};
  std::vector<int32_t> whole;
  for (const auto& t : turns) whole.insert(whole.end(), t.begin(), t.end());
  const auto pa = make_press("full", {}), pb = make_press("full", {});
  Session split(*f.model, f.pool, {.engine = f.options, .capacity = 128, .press = pa.get(), .n_predict = 4});
  Session joined(*f.model, f.pool, {.engine = f.options, .capacity = 128, .press = pb.get(), .n_predict = 4});
  std::vector<float> a;
  for (const auto& t : turns) a = copy(split.feed_turn(t, 4), f.n_vocab());
  std::vector<float> b = copy(joined.prefill(whole), f.n_vocab());
  EXPECT_EQ(split.history(), whole);
  ASSERT_EQ(a, b);
  for (int step = 0; step < 4; ++step) {
    const int32_t next = argmax(b);
    a = copy(split.decode(next), f.n_vocab());
    b = copy(joined.decode(next), f.n_vocab());
    ASSERT_EQ(a, b) << "decode step " << step;
  }
}

// With answers decoded between the turns (one token per forward pass), the whole conversation
// (answers included) fed at --batch 1 runs the same single-token passes.
TEST(LiveSessionTurns, FullWithAnswersBetweenTurnsIsBitIdenticalAtBatchOne) {
  Fixture f;
  f.options.batch = 1;
  const auto pa = make_press("full", {}), pb = make_press("full", {});
  Session split(*f.model, f.pool, {.engine = f.options, .capacity = 128, .press = pa.get(), .n_predict = 3});
  std::vector<float> last;
  for (int turn = 0; turn < 3; ++turn) {
    last = copy(split.feed_turn(tokens(7 + turn, f.n_vocab(), turn), 3), f.n_vocab());
    for (int i = 0; i < 3; ++i) last = copy(split.decode(argmax(last)), f.n_vocab());
  }
  Session joined(*f.model, f.pool, {.engine = f.options, .capacity = 128, .press = pb.get(), .n_predict = 3});
  EXPECT_EQ(copy(joined.prefill(split.history()), f.n_vocab()), last);
}

// StreamingLLM's rule: after every turn each head keeps the sinks and the most recent tokens of
// the whole history (answers included).
TEST(LiveSessionRules, StreamingLlmKeepsTheSinksAndTheMostRecentOfTheHistory) {
  Fixture f;
  const int64_t budget = 12;
  const auto press = make_press("streaming_llm", {"sinks=3"});
  Session s(*f.model, f.pool,
            {.engine = f.options, .capacity = 128, .press = press.get(), .budget = budget, .n_predict = 2});
  for (int turn = 0; turn < 3; ++turn) {
    const float* logits = s.feed_turn(tokens(10, f.n_vocab(), turn), 2);
    const int64_t n = s.n_past();
    std::vector<int64_t> expected = {0, 1, 2};
    for (int64_t p = std::max<int64_t>(3, n - (budget - 3)); p < n; ++p) expected.push_back(p);
    for (const auto& kept : kept_positions(s.kv())) EXPECT_EQ(kept, expected) << "turn " << turn;
    s.decode(argmax(copy(logits, f.n_vocab())));
  }
}

// KeyDiff and LagKV (every_block) just continue: turns cut at block boundaries keep what one
// long prompt keeps, and give the same logits.
TEST(LiveSessionRules, BlockWiseMethodsContinueAcrossTurns) {
  for (const auto& [method, opts] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"keydiff", {"block=8"}}, {"lagkv", {"sink=4", "lag=8", "every_block=true"}}}) {
    Fixture f;
    f.options.batch = 8;
    const auto pa = make_press(method, opts), pb = make_press(method, opts);
    Session split(*f.model, f.pool,
                  {.engine = f.options, .capacity = 128, .press = pa.get(), .budget = 16, .n_predict = 0});
    Session joined(*f.model, f.pool,
                   {.engine = f.options, .capacity = 128, .press = pb.get(), .budget = 16, .n_predict = 0});
    std::vector<int32_t> whole;
    std::vector<float> a;
    for (int turn = 0; turn < 3; ++turn) {
      const auto t = tokens(16 + 8 * turn, f.n_vocab(), turn);
      whole.insert(whole.end(), t.begin(), t.end());
      a = copy(split.feed_turn(t, 0), f.n_vocab());
    }
    const std::vector<float> b = copy(joined.prefill(whole), f.n_vocab());
    EXPECT_EQ(kept_positions(split.kv()), kept_positions(joined.kv())) << method;
    EXPECT_EQ(a, b) << method;
    EXPECT_LT(split.kv().total_tokens(), int64_t(whole.size()) * 4) << method << " evicted nothing";
  }
}

// Records, in double precision, the attention rows of the queries at or after `from`.
class WindowRecorder final : public AttentionProbe, public Press {
 public:
  WindowRecorder(const ModelConfig& c, int64_t from) : config_(c), from_(from), sums_(size_t(c.n_layers) * c.n_heads) {}
  AttentionProbe* prefill_probe() override { return this; }
  void on_row(int layer, int q_head, int64_t position, const float* probs, int64_t n) override {
    if (position < from_) return;
    std::lock_guard lock(mutex_);
    std::vector<double>& s = sums_[size_t(layer) * config_.n_heads + q_head];
    if (int64_t(s.size()) < n) s.resize(n, 0.0);
    for (int64_t j = 0; j < n; ++j) s[j] += probs[j];
  }
  // After an eviction: each query head's sums follow its KV head's kept cache indices.
  void compact(const std::vector<std::vector<int32_t>>& kept_per_kv_head) {
    const int group = config_.group_size();
    for (int l = 0; l < config_.n_layers; ++l)
      for (int q = 0; q < config_.n_heads; ++q) {
        std::vector<double>& s = sums_[size_t(l) * config_.n_heads + q];
        const std::vector<int32_t>& keep = kept_per_kv_head[size_t(l) * config_.n_kv_heads + q / group];
        std::vector<double> kept;
        for (int32_t i : keep) kept.push_back(i < int32_t(s.size()) ? s[i] : 0.0);
        s = kept;
      }
  }
  // Group mean over the query heads of a KV head, first n entries.
  std::vector<double> votes(int layer, int kv_head, int64_t n) const {
    const int group = config_.group_size();
    std::vector<double> v(n, 0.0);
    for (int g = 0; g < group; ++g) {
      const std::vector<double>& s = sums_[size_t(layer) * config_.n_heads + kv_head * group + g];
      for (int64_t j = 0; j < n && j < int64_t(s.size()); ++j) v[j] += s[j] / group;
    }
    return v;
  }

 private:
  ModelConfig config_;
  int64_t from_;
  std::mutex mutex_;
  std::vector<std::vector<double>> sums_;
};

// SnapKV's rule at a later turn: the last `window` positions of the history (the new turn's
// last queries) vote on everything the head holds (kept plus new); votes max-pooled (kernel 7)
// over the prefix; the window and the top (budget - window) of the prefix stay. Computed here on
// a `full` session whose cache is cut to what the snapkv session kept after turn 1.
TEST(LiveSessionRules, SnapKvSelectsAgainOverKeptPlusNewTokens) {
  Fixture f;
  const int64_t budget = 20, window = 4;
  const auto t1 = tokens(40, f.n_vocab(), 1), t2 = tokens(18, f.n_vocab(), 2);
  const auto press = make_press("snapkv", {"window=4", "kernel=7"});
  Session s(*f.model, f.pool,
            {.engine = f.options, .capacity = 128, .press = press.get(), .budget = budget, .n_predict = 0});
  s.feed_turn(t1, 0);
  const auto kept1 = kept_positions(s.kv());
  s.feed_turn(t2, 0);
  const auto kept2 = kept_positions(s.kv());

  const int64_t n_history = int64_t(t1.size() + t2.size());
  WindowRecorder recorder(f.model->config(), n_history - window);
  Session ref(*f.model, f.pool, {.engine = f.options, .capacity = 128, .press = &recorder, .n_predict = 0});
  ref.feed_turn(t1, 0);
  PagedKvCache& kv = ref.mutable_kv();
  for (int l = 0; l < kv.n_layers(); ++l)
    for (int h = 0; h < kv.n_kv_heads(); ++h) {
      std::vector<int32_t> keep;
      for (int64_t p : kept1[size_t(l) * kv.n_kv_heads() + h]) keep.push_back(int32_t(p));  // positions = indices here
      kv.head(l, h).retain(keep, kv.pool());
    }
  ref.feed_turn(t2, 0);
  for (int l = 0; l < kv.n_layers(); ++l)
    for (int h = 0; h < kv.n_kv_heads(); ++h) {
      const HeadCache& head = kv.head(l, h);
      const int64_t n = head.size(), prefix = n - window;
      const std::vector<double> v = recorder.votes(l, h, n);
      std::vector<double> pooled(prefix);
      for (int64_t i = 0; i < prefix; ++i) {
        pooled[i] = v[i];
        for (int64_t j = std::max<int64_t>(0, i - 3); j <= std::min(prefix - 1, i + 3); ++j)
          pooled[i] = std::max(pooled[i], v[j]);
      }
      std::vector<int64_t> order(prefix);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return pooled[a] > pooled[b]; });
      std::vector<int64_t> expected;
      for (int64_t i = 0; i < budget - window; ++i) expected.push_back(head.position(order[i]));
      for (int64_t i = prefix; i < n; ++i) expected.push_back(head.position(i));
      std::sort(expected.begin(), expected.end());
      EXPECT_EQ(kept2[size_t(l) * kv.n_kv_heads() + h], expected) << "layer " << l << " head " << h;
    }
}

// H2O's rule: the attention each kept token received in turn 1 carries over, turn 2's queries add
// theirs (every query, over kept plus new tokens), then the `recent` newest tokens plus the top
// scores stay. Computed here in double precision on a `full` session cut like the h2o one.
TEST(LiveSessionRules, H2oCarriesItsAccumulatorsAcrossTurns) {
  Fixture f;
  const int64_t budget = 16;
  const auto t1 = tokens(40, f.n_vocab(), 1), t2 = tokens(18, f.n_vocab(), 2);
  const auto press = make_press("h2o", {"decode=false"});
  Session s(*f.model, f.pool,
            {.engine = f.options, .capacity = 128, .press = press.get(), .budget = budget, .n_predict = 0});
  s.feed_turn(t1, 0);
  const auto kept1 = kept_positions(s.kv());
  s.feed_turn(t2, 0);
  const auto kept2 = kept_positions(s.kv());

  WindowRecorder recorder(f.model->config(), 0);
  Session ref(*f.model, f.pool, {.engine = f.options, .capacity = 128, .press = &recorder, .n_predict = 0});
  ref.feed_turn(t1, 0);
  PagedKvCache& kv = ref.mutable_kv();
  std::vector<std::vector<int32_t>> keep1;
  for (const auto& positions : kept1) keep1.emplace_back(positions.begin(), positions.end());
  for (int l = 0; l < kv.n_layers(); ++l)
    for (int h = 0; h < kv.n_kv_heads(); ++h) kv.head(l, h).retain(keep1[size_t(l) * kv.n_kv_heads() + h], kv.pool());
  recorder.compact(keep1);
  ref.feed_turn(t2, 0);
  const int64_t recent = budget / 2;  // floor(0.5 * budget)
  for (int l = 0; l < kv.n_layers(); ++l)
    for (int h = 0; h < kv.n_kv_heads(); ++h) {
      const HeadCache& head = kv.head(l, h);
      const int64_t n = head.size();
      std::vector<double> v = recorder.votes(l, h, n);
      for (int64_t i = n - recent; i < n; ++i) v[i] = INFINITY;
      std::vector<int64_t> order(n);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return v[a] > v[b]; });
      std::vector<int64_t> expected;
      for (int64_t i = 0; i < budget; ++i) expected.push_back(head.position(order[i]));
      std::sort(expected.begin(), expected.end());
      EXPECT_EQ(kept2[size_t(l) * kv.n_kv_heads() + h], expected) << "layer " << l << " head " << h;
    }
}

// RocketKV-MT keeps the whole history cached (it only attends sparsely); plain RocketKV evicts
// at every turn.
TEST(LiveSessionRules, RocketKvMtKeepsTheFullKvAndPlainRocketKvEvictsEachTurn) {
  Fixture f;
  const auto mt = make_press("rocketkv", {"mt=true", "window=4", "kernel=3"});
  const auto plain = make_press("rocketkv", {"window=4", "kernel=3"});
  Session a(*f.model, f.pool, {.engine = f.options, .capacity = 256, .press = mt.get(), .budget = 16, .n_predict = 4});
  Session b(*f.model, f.pool,
            {.engine = f.options, .capacity = 256, .press = plain.get(), .budget = 16, .n_predict = 4});
  for (int turn = 0; turn < 3; ++turn) {
    std::vector<float> la = copy(a.feed_turn(tokens(40, f.n_vocab(), turn), 4), f.n_vocab());
    std::vector<float> lb = copy(b.feed_turn(tokens(40, f.n_vocab(), turn), 4), f.n_vocab());
    EXPECT_EQ(a.kv().total_tokens(), a.n_past() * a.kv().n_layers() * a.kv().n_kv_heads()) << "turn " << turn;
    EXPECT_LT(b.kv().head(0, 0).size(), b.n_past()) << "turn " << turn;
    for (int i = 0; i < 4; ++i) {
      la = copy(a.decode(argmax(la)), f.n_vocab());
      lb = copy(b.decode(argmax(lb)), f.n_vocab());
    }
  }
}

// A conversation that rewrites an earlier token: the session rewinds to it, re-prefills from it
// and says how much it dropped; the result equals a session fed the new conversation directly.
TEST(LiveSessionRewind, RewrittenHistoryReprefillsFromTheFirstDifferingToken) {
  Fixture f;
  f.options.batch = 1;
  SamplerParams greedy;
  greedy.temperature = 0;
  CompressionOptions full;
  LiveSession live(*f.model, f.pool, f.options, full, greedy);
  std::vector<int32_t> conv = tokens(20, f.n_vocab(), 1);
  live.prompt(conv, 3);
  live.answer(3);
  std::vector<int32_t> next = live.transcript();
  const int64_t pending = int64_t(next.size() - live.history().size());  // the last answer token, not fed yet
  EXPECT_LE(pending, 1);
  const auto q = tokens(6, f.n_vocab(), 2);
  next.insert(next.end(), q.begin(), q.end());
  live.prompt(next, 3);
  EXPECT_EQ(live.last_turn().reprefilled, 0);
  EXPECT_EQ(live.last_turn().reused, int64_t(next.size() - q.size()) - pending);
  EXPECT_EQ(live.last_turn().turn_tokens, int64_t(q.size()) + pending);

  std::vector<int32_t> rewritten = next;
  rewritten[10] = rewritten[10] == 5 ? 6 : 5;
  const std::vector<float> got = copy(live.prompt(rewritten, 3), f.n_vocab());
  EXPECT_EQ(live.last_turn().reused, 10);
  EXPECT_EQ(live.last_turn().reprefilled, int64_t(next.size()) - 10);
  EXPECT_EQ(live.last_turn().turn_tokens, int64_t(rewritten.size()) - 10);
  EXPECT_EQ(live.history(), rewritten);

  LiveSession fresh(*f.model, f.pool, f.options, full, greedy);
  EXPECT_EQ(copy(fresh.prompt(rewritten, 3), f.n_vocab()), got);
}

TEST(LiveSessionRewind, ATurnThatCannotFitLeavesTheSessionUnchanged) {
  Fixture f;
  f.options.context = 32;
  CompressionOptions full;
  LiveSession live(*f.model, f.pool, f.options, full, SamplerParams{});
  live.prompt(tokens(20, f.n_vocab()), 0);
  const auto before = live.history();
  std::vector<int32_t> longer = before;
  const auto more = tokens(20, f.n_vocab(), 4);
  longer.insert(longer.end(), more.begin(), more.end());
  try {
    live.prompt(longer, 0);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--ctx"), std::string::npos) << e.what();
  }
  EXPECT_EQ(live.history(), before);
  EXPECT_THROW(live.prompt({}, 0), Error);
  EXPECT_THROW(live.prompt({f.n_vocab()}, 0), Error);
  EXPECT_EQ(live.history(), before);
}

}  // namespace
}  // namespace kvslim

namespace kvslim {
namespace {

// Every registered method runs four turns with answers between them: no error, the history is
// every token fed or decoded, and each head holds distinct original positions, ascending, all in
// the history; methods that evict at prefill keep at most the budget per head after each turn
// (AdaKV and PyramidKV per layer / model, as in one turn: the registry's budget rule), and each
// follows its multi-turn rule as far as it shows from outside (state carried, nothing evicted).
class EveryMethodMultiTurn : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryMethodMultiTurn, FourTurnsKeepAConsistentCache) {
  Fixture f;
  const std::string method = GetParam();
  std::vector<std::string> opts;
  if (method == "lookaheadkv") opts = {"adapter=" + testing::random_adapter_path(*f.model)};
  const int64_t budget = 24;
  const auto press = make_press(method, opts);
  const PressCapabilities& can = PressSpec::parse(method).can();  // the rules it is held to
  Session s(*f.model, f.pool,
            {.engine = f.options, .capacity = 512, .press = press.get(), .budget = budget, .n_predict = 4});
  std::vector<int32_t> fed;
  for (int turn = 0; turn < 4; ++turn) {
    const auto t = tokens(30 + 7 * turn, f.n_vocab(), turn);
    fed.insert(fed.end(), t.begin(), t.end());
    std::vector<float> logits = copy(s.feed_turn(t, 4), f.n_vocab());
    const PagedKvCache& kv = s.kv();
    int64_t total = 0;
    for (int l = 0; l < kv.n_layers(); ++l)
      for (int h = 0; h < kv.n_kv_heads(); ++h) {
        const HeadCache& head = kv.head(l, h);
        total += head.size();
        for (int64_t i = 0; i < head.size(); ++i) {
          ASSERT_LT(head.position(i), s.n_past());
          if (i > 0) {
            ASSERT_GT(head.position(i), head.position(i - 1));
          }
        }
        if (can.budget_rule == BudgetRule::PerHead) {
          EXPECT_LE(head.size(), budget) << "turn " << turn;
        }
      }
    if (can.budget_rule == BudgetRule::PerLayer || can.budget_rule == BudgetRule::PerModel) {
      EXPECT_LE(total, budget * kv.n_layers() * kv.n_kv_heads());
    }
    // The multi-turn rule: only a method that carries state across turns has any for a KV file,
    // and one that keeps everything holds the whole history in every head.
    PressState state;
    press->save_state(state);
    EXPECT_EQ(can.multi_turn == MultiTurnRule::CarryOver, !state.f32.empty() || !state.i64.empty()) << "turn " << turn;
    if (can.multi_turn == MultiTurnRule::KeepAll) {
      EXPECT_EQ(total, s.n_past() * kv.n_layers() * kv.n_kv_heads());
    }
    for (int i = 0; i < 4; ++i) {
      const int32_t next = argmax(logits);
      fed.push_back(next);
      logits = copy(s.decode(next), f.n_vocab());
    }
    ASSERT_EQ(s.history(), fed);
  }
}

std::vector<std::string> method_names() {
  std::vector<std::string> names;
  for (const PressInfo& info : press_registry()) names.push_back(info.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryMethodMultiTurn, ::testing::ValuesIn(method_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvslim
