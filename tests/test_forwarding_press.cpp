// ForwardingPress hands every Press hook to the press it wraps: a recorder wrapped by it sees each
// hook called on the wrapper, with the same arguments, and the wrapper returns what the recorder
// returns. A hook the base did not forward would reach Press's default instead (begin_turn would
// arrive as begin, evicts_each_prefill_block would follow prefill_block, save_state would write
// nothing), which fails here; a hook added to Press is added to the list below.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fake_press_context.h"
#include "press/forwarding_press.h"

namespace kvslim {
namespace {

ModelConfig one_head_config() {
  ModelConfig c;
  c.n_layers = 1;
  c.n_heads = c.n_kv_heads = 1;
  c.head_dim = c.n_rot = 16;
  c.dim = c.ffn_dim = 16;
  c.n_vocab = 16;
  c.context_length = 64;
  return c;
}

testing::FakeContextOptions small_cache() {
  testing::FakeContextOptions options;
  options.capacity = 8;
  return options;
}

class NullProbe final : public AttentionProbe {
 public:
  void on_row(int, int, int64_t, const float*, int64_t) override {}
};

class NullSelector final : public SparseSelector {
 public:
  bool select(int, const float*, const PagedKvCache&, std::vector<std::vector<int32_t>>&, ThreadPool&) override {
    return false;
  }
};

// Answers every hook with a value Press's defaults never give, and notes each call.
class Recorder final : public Press {
 public:
  const std::vector<std::string>& calls() const { return log_; }
  const PressContext* last_ctx = nullptr;
  NullProbe prefill, decode;
  NullSelector selector;

  AttentionProbe* prefill_probe() override { return note("prefill_probe"), &prefill; }
  AttentionProbe* decode_probe() override { return note("decode_probe"), &decode; }
  SparseSelector* sparse_selector() override { return note("sparse_selector"), &selector; }
  int prefill_block() const override { return note("prefill_block"), 0; }
  bool evicts_each_prefill_block() const override { return note("evicts_each_prefill_block"), true; }
  void check_budget(int64_t budget) const override { note("check_budget " + std::to_string(budget)); }
  void begin(PressContext& ctx) override { note("begin", ctx); }
  void before_prefill_block(PressContext& ctx, int64_t n) override {
    note("before_prefill_block " + std::to_string(n), ctx);
  }
  void after_prefill_block(PressContext& ctx) override { note("after_prefill_block", ctx); }
  void end_prefill(PressContext& ctx) override { note("end_prefill", ctx); }
  void after_extend(PressContext& ctx) override { note("after_extend", ctx); }
  void after_decode_step(PressContext& ctx) override { note("after_decode_step", ctx); }
  void begin_turn(PressContext& ctx) override { note("begin_turn", ctx); }
  void rewind(PressContext& ctx) override { note("rewind", ctx); }
  void save_state(PressState& state) const override {
    note("save_state");
    state.i64["recorder"] = {7};
  }
  void load_state(PressContext& ctx, const PressState& state) override {
    note("load_state " + std::to_string(state.i64.at("recorder").at(0)), ctx);
  }
  std::optional<TokenCost> token_cost() const override { return note("token_cost"), TokenCost{3, 5}; }

 private:
  // Const hooks are noted too: the log is not the press's state.
  void note(const std::string& call) const { log_.push_back(call); }
  void note(const std::string& call, PressContext& ctx) {
    log_.push_back(call);
    last_ctx = &ctx;
  }
  mutable std::vector<std::string> log_;
};

// Every hook, in Press's order, called on `press`; the calls a recorder behind it must see.
std::vector<std::string> call_every_hook(Press& press, PressContext& ctx, const Recorder& recorder) {
  EXPECT_EQ(press.prefill_probe(), &recorder.prefill);
  EXPECT_EQ(press.decode_probe(), &recorder.decode);
  EXPECT_EQ(press.sparse_selector(), &recorder.selector);
  EXPECT_EQ(press.prefill_block(), 0);
  EXPECT_TRUE(press.evicts_each_prefill_block());  // Press's default would say false (block 0)
  press.check_budget(42);
  press.begin(ctx);
  press.before_prefill_block(ctx, 9);
  press.after_prefill_block(ctx);
  press.end_prefill(ctx);
  press.after_extend(ctx);
  press.after_decode_step(ctx);
  press.begin_turn(ctx);
  press.rewind(ctx);
  PressState state;
  press.save_state(state);
  EXPECT_EQ(state.i64["recorder"], std::vector<int64_t>{7});
  press.load_state(ctx, state);
  const std::optional<TokenCost> cost = press.token_cost();
  EXPECT_TRUE(cost && cost->storage == 3 && cost->traffic == 5);
  return {"prefill_probe",
          "decode_probe",
          "sparse_selector",
          "prefill_block",
          "evicts_each_prefill_block",
          "check_budget 42",
          "begin",
          "before_prefill_block 9",
          "after_prefill_block",
          "end_prefill",
          "after_extend",
          "after_decode_step",
          "begin_turn",
          "rewind",
          "save_state",
          "load_state 7",
          "token_cost"};
}

TEST(ForwardingPress, TheWrappedPressSeesEveryHook) {
  testing::FakePressContext ctx(one_head_config(), small_cache());
  Recorder recorder;
  ForwardingPress wrapper(recorder);
  const std::vector<std::string> expected = call_every_hook(wrapper, ctx, recorder);
  EXPECT_EQ(recorder.calls(), expected);
  EXPECT_EQ(recorder.last_ctx, &ctx);
}

// A wrapper that changes one hook still forwards all the others (and its own, when it says so).
class CountingBlocks final : public ForwardingPress {
 public:
  using ForwardingPress::ForwardingPress;
  int blocks = 0;
  void after_prefill_block(PressContext& ctx) override {
    ++blocks;
    ForwardingPress::after_prefill_block(ctx);
  }
};

TEST(ForwardingPress, AWrapperOverridingOneHookForwardsTheRest) {
  testing::FakePressContext ctx(one_head_config(), small_cache());
  auto owned = std::make_unique<Recorder>();
  Recorder& recorder = *owned;
  CountingBlocks wrapper(std::move(owned));
  const std::vector<std::string> expected = call_every_hook(wrapper, ctx, recorder);
  EXPECT_EQ(recorder.calls(), expected);
  EXPECT_EQ(wrapper.blocks, 1);
}

}  // namespace
}  // namespace kvslim
