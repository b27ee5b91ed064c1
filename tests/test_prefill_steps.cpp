// Resumable prefill (Session::begin_prefill / prefill_step, what the server's slots use to take
// turns block by block): a turn prefilled step by step, with another session's prefill blocks and
// decode steps run on the same thread pool between its steps, ends bit-identical to the same turn
// prefilled in one call (feed_turn) by a session that runs alone: the same last logits, the same
// kept positions in every (layer, KV head), the same logits while decoding after it, and the same
// again for a second turn. For no compression, SnapKV and KeyDiff (block hooks, its own block
// size), and SnapKV and DapQ with block-wise prefill eviction (DapQ runs forward rows in its block
// hooks, which reuse the session's forward buffers).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/session.h"
#include "model/model.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim {
namespace {

constexpr int kBlock = 16;
constexpr int64_t kBudget = 24;

const Model& tiny_model() { return testing::loaded_tiny_model(); }

std::vector<int32_t> tokens(int n, int salt, int n_vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[size_t(i)] = 3 + (i * 37 + salt * 101 + 11) % (n_vocab - 3);
  return t;
}

struct State {
  std::vector<float> logits;                    // after the turn, then after each decode step
  std::vector<std::vector<int64_t>> positions;  // kept after the turn, per (layer, KV head)
};

void record(const Session& s, State& out) {
  const int n_vocab = tiny_model().config().n_vocab;
  out.logits.insert(out.logits.end(), s.last_logits(), s.last_logits() + n_vocab);
  const PagedKvCache& kv = s.kv();
  for (int l = 0; l < kv.n_layers(); ++l)
    for (int h = 0; h < kv.n_kv_heads(); ++h) {
      out.positions.emplace_back();
      for (int64_t i = 0; i < kv.head(l, h).size(); ++i) out.positions.back().push_back(kv.head(l, h).position(i));
    }
}

// Two turns (prefill, 4 greedy tokens each); `stepwise` runs each turn block by block with
// `other`'s work between the blocks.
State run(const std::string& method, const std::string& prefill_evict, bool stepwise, ThreadPool& pool) {
  const Model& model = tiny_model();
  const int n_vocab = model.config().n_vocab;
  EngineOptions engine;
  engine.batch = kBlock;
  engine.context = 512;
  CompressionOptions c;
  c.press = method;
  c.prefill_evict = parse_prefill_evict(prefill_evict);
  const auto press = c.make_press();
  Session session(model, pool,
                  {.engine = engine,
                   .capacity = engine.context,
                   .press = press.get(),
                   .budget = method == "full" ? kNoBudget : kBudget,
                   .seed = 7});
  // The neighbour: another slot's session (SnapKV), prefilling and decoding between our blocks.
  CompressionOptions other_c;
  other_c.press = "snapkv";
  const auto other_press = other_c.make_press();
  Session other(model, pool,
                {.engine = engine, .capacity = engine.context, .press = other_press.get(), .budget = 20, .seed = 3});
  other.begin_prefill(tokens(70, 9, n_vocab), 64);
  auto other_work = [&] {
    if (other.prefilling())
      other.prefill_step();
    else
      other.decode(int32_t(std::max_element(other.last_logits(), other.last_logits() + n_vocab) - other.last_logits()));
  };

  State state;
  for (int turn = 0; turn < 2; ++turn) {
    const std::vector<int32_t> t = tokens(turn == 0 ? 150 : 45, turn, n_vocab);
    if (stepwise) {
      session.begin_prefill(t, 4);
      int steps = 0;
      while (session.prefilling()) {
        other_work();
        EXPECT_LE(session.prefill_step(), kBlock);
        ++steps;
      }
      EXPECT_GE(steps, int(t.size()) / kBlock) << "the turn ran in blocks";
    } else {
      session.feed_turn(t, 4);
    }
    record(session, state);
    for (int i = 0; i < 4; ++i) {
      const float* l = session.last_logits();
      session.decode(int32_t(std::max_element(l, l + n_vocab) - l));
      if (stepwise) other_work();
      state.logits.insert(state.logits.end(), session.last_logits(), session.last_logits() + n_vocab);
    }
  }
  return state;
}

TEST(PrefillSteps, StepwiseInterleavedPrefillIsBitIdenticalToOneShot) {
  ThreadPool pool(2);
  const std::vector<std::pair<std::string, std::string>> methods = {
      {"full", "end"}, {"snapkv", "end"}, {"keydiff", "end"}, {"snapkv", "block"}, {"dapq", "block"}};
  for (const auto& [method, evict] : methods) {
    SCOPED_TRACE(method + " --prefill-evict " + evict);
    const State one_shot = run(method, evict, false, pool);
    const State stepwise = run(method, evict, true, pool);
    ASSERT_EQ(one_shot.logits.size(), stepwise.logits.size());
    EXPECT_EQ(std::memcmp(one_shot.logits.data(), stepwise.logits.data(), one_shot.logits.size() * sizeof(float)), 0);
    EXPECT_EQ(one_shot.positions, stepwise.positions);
    if (method != "full") {  // the budget was applied: the comparison covers an eviction
      size_t kept = 0;
      for (const auto& p : one_shot.positions) kept = std::max(kept, p.size());
      EXPECT_LT(kept, 150u);
    }
  }
}

TEST(PrefillSteps, HalfPrefilledSessionRefusesEverythingElse) {
  ThreadPool pool(2);
  const Model& model = tiny_model();
  EngineOptions engine;
  engine.batch = kBlock;
  Session session(model, pool, {.engine = engine, .capacity = 512});
  session.begin_prefill(tokens(40, 0, model.config().n_vocab), 4);
  EXPECT_EQ(session.prefill_step(), kBlock);
  EXPECT_TRUE(session.prefilling());
  EXPECT_THROW(session.decode(5), Error);
  EXPECT_THROW(session.feed_turn({5, 6}, 1), Error);
  EXPECT_THROW(session.extend({5}), Error);
  EXPECT_EQ(session.prefill_step(), kBlock);
  EXPECT_EQ(session.prefill_step(), 40 - 2 * kBlock);
  EXPECT_FALSE(session.prefilling());
  EXPECT_THROW(session.prefill_step(), Error);
  EXPECT_EQ(session.n_past(), 40);
  session.decode(5);  // a finished prefill decodes
  EXPECT_EQ(session.n_past(), 41);
}

// A later turn longer than the context: with block-wise eviction each head holds at most
// budget + one block while it runs, so it fits (Session::check_turn_fits); evicting only at the
// end of the turn needs the whole turn in the cache, which is refused with the session unchanged.
TEST(PrefillSteps, TurnLongerThanTheContextFitsWithBlockEviction) {
  ThreadPool pool(2);
  const Model& model = tiny_model();
  const int n_vocab = model.config().n_vocab;
  EngineOptions engine;
  engine.batch = kBlock;
  engine.context = 100;
  for (const std::string evict : {"block", "end"}) {
    SCOPED_TRACE(evict);
    for (const std::string method : {"snapkv", "adakv", "keydiff"}) {
      SCOPED_TRACE(method);
      CompressionOptions c;
      c.press = method;
      c.prefill_evict = parse_prefill_evict(method == "keydiff" ? "end" : evict);  // KeyDiff always evicts per block
      const auto press = c.make_press();
      Session session(model, pool,
                      {.engine = engine,
                       .capacity = engine.context,
                       .press = press.get(),
                       .budget = kBudget,
                       .n_predict = 8,
                       .seed = 1});
      session.feed_turn(tokens(60, 0, n_vocab), 8);
      const std::vector<int32_t> turn = tokens(150, 1, n_vocab);  // 150 > --ctx 100
      if (evict == "end" && method != "keydiff") {
        EXPECT_THROW(session.feed_turn(turn, 8), Error);
        EXPECT_EQ(session.n_past(), 60);  // unchanged
        continue;
      }
      session.feed_turn(turn, 8);
      EXPECT_EQ(session.n_past(), 210);
      const PagedKvCache& kv = session.kv();
      for (int l = 0; l < kv.n_layers(); ++l)
        for (int h = 0; h < kv.n_kv_heads(); ++h) EXPECT_LE(kv.head(l, h).size(), kBudget);
      EXPECT_LE(kv.peak_bytes() / kv.pool().page_bytes(),
                uint64_t(kv.n_layers() * kv.n_kv_heads()) * (kBudget + kBlock + engine.page_tokens));
      session.decode(5);  // and the answer follows
    }
  }
}

}  // namespace
}  // namespace kvslim
