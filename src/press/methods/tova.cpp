// tova: the last query's attention (group mean) decides; keep the top `budget`, and at each
// decode step evict the token the newest query attends to least.
#include "press/attention_accumulator.h"
#include "press/methods.h"
#include "press/scorer_press.h"

namespace kvslim {

namespace {

class TovaPress final : public ScorerPress {
 public:
  explicit TovaPress(bool block) { set_block_eviction(block); }

  AttentionProbe* prefill_probe() override { return &last_row_; }
  AttentionProbe* decode_probe() override { return &last_row_; }

  void begin(PressContext& ctx) override {
    if (!block_) last_row_.reset(ctx.config(), ctx.n_prompt(), ctx.n_prompt() - 1);
  }
  // Block-wise, the block's last query decides.
  void before_prefill_block(PressContext& ctx, int64_t n_tokens) override {
    if (block_) last_row_.reset(ctx.config(), largest_head(ctx.cache()) + n_tokens, ctx.n_past() + n_tokens - 1);
  }

  std::vector<float> score(PressContext& ctx, int layer, int kv_head) override {
    std::vector<float> s = last_row_.group_mean(layer, kv_head);
    s.resize(ctx.cache().head(layer, kv_head).size());
    return s;
  }

  void end_prefill(PressContext& ctx) override {
    compress(ctx);
    prepare_next_step(ctx);
  }

  // The question appended after compression: the next decode row reads it too.
  void after_extend(PressContext& ctx) override { prepare_next_step(ctx); }

  // The probe saw the new token's attention over each head's cache (itself included).
  void after_decode_step(PressContext& ctx) override {
    compress(ctx);
    prepare_next_step(ctx);
  }

 private:
  // The next decode token's row is the one to record; size the sums for the largest head + 1.
  void prepare_next_step(PressContext& ctx) {
    int64_t largest = 0;
    for (int layer : ctx.cache().global_layers()) largest = std::max(largest, ctx.cache().n_tokens(layer));
    last_row_.reset(ctx.config(), largest + 1, ctx.n_past());
  }

  AttentionAccumulator last_row_;
};

}  // namespace

PressInfo tova_press() {
  return {"tova",
          "the last query's attention ranks tokens; decode evicts the least attended token each step",
          {prefill_evict_option()},
          [](const PressOptions& o) { return std::make_unique<TovaPress>(block_eviction(o)); },
          {.block_eviction = BlockEviction::Option,
           .budget_rule = BudgetRule::PerHead,
           .adakv_wraps = true,
           .multi_turn = MultiTurnRule::SelectAgain}};
}

}  // namespace kvslim
