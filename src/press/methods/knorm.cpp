// knorm: keeps the keys of smallest L2 norm (score = -||k||), no attention needed.
#include <cmath>

#include "press/methods.h"
#include "press/scorer_press.h"

namespace kvslim {

namespace {

class KnormPress final : public ScorerPress {
 public:
  explicit KnormPress(bool block) { set_block_eviction(block); }

  std::vector<float> score(PressContext& ctx, int layer, int kv_head) override {
    const HeadCache& head = ctx.cache().head(layer, kv_head);
    const int d = ctx.cache().head_dim();
    std::vector<float> scores(head.size()), row(d);
    for (int64_t i = 0; i < head.size(); ++i) {
      const float* k = head.key_f32(i, row.data());
      double sq = 0;
      for (int c = 0; c < d; ++c) sq += double(k[c]) * k[c];
      scores[i] = -float(std::sqrt(sq));
    }
    return scores;
  }
};

}  // namespace

PressInfo knorm_press() {
  return {"knorm",
          "keeps the keys with the smallest L2 norm",
          {prefill_evict_option()},
          [](const PressOptions& o) { return std::make_unique<KnormPress>(block_eviction(o)); },
          {.block_eviction = BlockEviction::Option,
           .budget_rule = BudgetRule::PerHead,
           .adakv_wraps = true,
           .multi_turn = MultiTurnRule::SelectAgain}};
}

}  // namespace kvslim
