// streaming_llm: the first `sinks` tokens plus the most recent ones; in decode the window
// slides (the oldest non-sink token is evicted) so each head stays at the budget.
#include <algorithm>
#include <numeric>

#include "press/methods.h"
#include "press/scorer_press.h"

namespace kvslim {

namespace {

class StreamingLlmPress final : public Press {
 public:
  StreamingLlmPress(int sinks, bool block) : sinks_(sinks), block_(block) {}

  // Block-wise the window slides after every block: the same tokens survive as at the end.
  void after_prefill_block(PressContext& ctx) override {
    if (block_) evict(ctx);
  }
  void end_prefill(PressContext& ctx) override { evict(ctx); }
  void after_decode_step(PressContext& ctx) override { evict(ctx); }

 private:
  void evict(PressContext& ctx) {
    PagedKvCache& cache = ctx.cache();
    const int64_t budget = ctx.budget();
    for (int layer : cache.global_layers())
      for (int h = 0; h < cache.n_kv_heads(); ++h) {
        const int64_t n = cache.head(layer, h).size();
        if (n <= budget) continue;
        const int64_t sinks = std::min<int64_t>(sinks_, budget);
        keep_.resize(budget);
        std::iota(keep_.begin(), keep_.begin() + sinks, 0);
        std::iota(keep_.begin() + sinks, keep_.end(), int32_t(n - (budget - sinks)));
        ctx.keep(layer, h, keep_);
      }
  }

  int sinks_;
  bool block_;
  std::vector<int32_t> keep_;  // reused every decode step
};

}  // namespace

PressInfo streaming_llm_press() {
  return {"streaming_llm",
          "attention sinks plus a sliding window of the most recent tokens",
          {{"sinks", "4", "first tokens always kept"}, prefill_evict_option()},
          [](const PressOptions& o) {
            return std::make_unique<StreamingLlmPress>(o.get_int("sinks", 0, 1 << 20), block_eviction(o));
          },
          {.block_eviction = BlockEviction::Option,
           .budget_rule = BudgetRule::PerHead,
           .adakv_wraps = false,
           .multi_turn = MultiTurnRule::SelectAgain}};
}

}  // namespace kvslim
