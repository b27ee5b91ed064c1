// lookaheadkv: learned lookahead rows with a LoRA active on them only (LookaheadKV, §3.1). After
// prefill, the adapter's m embeddings run as a continuation at the positions the response will
// occupy, n .. n+m-1, in one extra forward of m rows; prompt token j scores the mean over the
// lookahead queries (and the group's query heads) of their attention probability on j, pooled
// along the sequence (max, kernel 7); the top `budget` are kept (no forced window) and the
// lookahead rows' KV is dropped (Algorithm 2). The adapter is trained by `kvslim
// train-lookahead` and refuses to load on a model other than the one it was made for.
#include <optional>

#include "model/lookahead_adapter.h"
#include "press/attention_accumulator.h"
#include "press/methods.h"
#include "press/scorer_press.h"
#include "press/select.h"
#include "util/error.h"

namespace kvslim {

namespace {

class LookaheadKvPress final : public ScorerPress {
 public:
  LookaheadKvPress(std::string adapter_path, int kernel, PoolKind pooling, bool block)
      : adapter_path_(std::move(adapter_path)), kernel_(kernel), pooling_(pooling) {
    set_block_eviction(block);
  }

  // Loaded (and checked against the model) before any prefill work, whatever the budget.
  void begin(PressContext& ctx) override {
    adapter_ = LookaheadAdapter::load(adapter_path_, ctx.config(), ctx.model_fingerprint());
  }

  // Later turns of a session reuse the loaded adapter.
  void begin_turn(PressContext& ctx) override {
    if (!adapter_) begin(ctx);
  }

  // Runs only when some layer is over the budget (no extra forward pass otherwise); block-wise
  // after every block that leaves a layer over the budget, at the positions after that block.
  void prepare_scores(PressContext& ctx) override {
    votes_.reset(ctx.config(), largest_head(ctx.cache()), ctx.n_past());
    ctx.run_appended_rows(adapter_->embd.data(), adapter_->n_lookahead, &adapter_->lora, &votes_);
  }

  // Mean attention of the lookahead queries on each prompt token, group mean, pooled.
  std::vector<float> score(PressContext& ctx, int layer, int kv_head) override {
    std::vector<float> votes = votes_.group_mean(layer, kv_head);
    for (float& v : votes) v /= float(adapter_->n_lookahead);
    votes.resize(ctx.cache().head(layer, kv_head).size());
    return pool1d(votes, kernel_, pooling_);
  }

 private:
  std::string adapter_path_;
  int kernel_;
  PoolKind pooling_;
  std::optional<LookaheadAdapter> adapter_;
  AttentionAccumulator votes_;
};

}  // namespace

PressInfo lookaheadkv_press() {
  return {"lookaheadkv",
          "learned lookahead rows (with their own LoRA) at the response's positions vote; keeps the top tokens",
          {{"adapter", "", "adapter GGUF for this model (kvslim init-adapter / train-lookahead); required"},
           {"kernel", "7", "pooling kernel (odd)"},
           {"pooling", "max", "max, avg or none"},
           prefill_evict_option()},
          [](const PressOptions& o) {
            std::string adapter = o.get_string("adapter");
            if (adapter.empty())
              fail(
                  "lookaheadkv: option adapter=FILE is required (make one with `kvslim init-adapter` or "
                  "`kvslim train-lookahead`)");
            const int kernel = o.get_int("kernel", 1, 4095);
            if (kernel % 2 == 0) fail("lookaheadkv: option kernel={} must be odd", kernel);
            return std::make_unique<LookaheadKvPress>(
                std::move(adapter), kernel, pool_kind_from_name(o.get_choice("pooling", {"max", "avg", "none"})),
                block_eviction(o));
          },
          {.block_eviction = BlockEviction::Option,
           .budget_rule = BudgetRule::PerHead,
           .adakv_wraps = true,
           .multi_turn = MultiTurnRule::SelectAgain}};
}

}  // namespace kvslim
