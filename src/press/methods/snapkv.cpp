// snapkv: the last `window` prompt queries vote (sum of their attention probabilities, group
// mean), scores are pooled along the sequence, and the window plus the top (budget - window)
// prefix tokens are kept.
#include "press/attention_accumulator.h"
#include "press/methods.h"
#include "press/scorer_press.h"
#include "press/select.h"
#include "util/error.h"

namespace kvslim {

namespace {

class SnapKvPress final : public ScorerPress {
 public:
  SnapKvPress(int window, int kernel, PoolKind pooling) : window_(window), kernel_(kernel), pooling_(pooling) {}

  AttentionProbe* prefill_probe() override { return &votes_; }

  void check_budget(int64_t budget) const override {
    if (window_ > budget) fail("snapkv: window {} exceeds the budget {}", window_, budget);
  }

  void begin(PressContext& ctx) override { votes_.reset(ctx.config(), ctx.n_prompt(), ctx.n_prompt() - window_); }

  // Pooled votes for the prefix; the window's own entries are unused (it is always kept).
  std::vector<float> score(PressContext& ctx, int layer, int kv_head) override {
    const int64_t n = ctx.cache().head(layer, kv_head).size();
    std::vector<float> votes = votes_.group_mean(layer, kv_head);
    votes.resize(n);
    const int64_t prefix = std::max<int64_t>(0, n - window_);
    std::vector<float> pooled = pool1d(std::span<const float>(votes).first(prefix), kernel_, pooling_);
    pooled.resize(n, 0.0f);
    return pooled;
  }

  std::vector<int32_t> select(PressContext&, int, int, std::span<const float> scores, int64_t budget) override {
    const int64_t n = int64_t(scores.size());
    return window_plus_top(scores.first(std::max<int64_t>(0, n - window_)), n, window_, budget);
  }

 private:
  int window_, kernel_;
  PoolKind pooling_;
  AttentionAccumulator votes_;
};

}  // namespace

PressInfo snapkv_press() {
  return {"snapkv", "window queries vote on the prefix (pooled); keeps the window plus the top prefix tokens",
          {{"window", "32", "observation window: last prompt queries"},
           {"kernel", "7", "pooling kernel (odd)"},
           {"pooling", "max", "max, avg or none"}},
          [](const PressOptions& o) {
            const int kernel = o.get_int("kernel", 1, 4095);
            if (kernel % 2 == 0) fail("snapkv: option kernel={} must be odd", kernel);
            return std::make_unique<SnapKvPress>(o.get_int("window", 1, 1 << 20), kernel,
                                                 pool_kind_from_name(o.get_choice("pooling", {"max", "avg", "none"})));
          }};
}

}  // namespace kvslim
