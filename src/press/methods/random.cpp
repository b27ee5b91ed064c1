// random: uniform random scores, seeded (a floor every method should beat).
#include <random>

#include "press/methods.h"
#include "press/scorer_press.h"

namespace kvslim {

namespace {

class RandomPress final : public ScorerPress {
 public:
  std::vector<float> score(PressContext& ctx, int layer, int kv_head) override {
    // One generator per (seed, layer, head): the choice does not depend on scoring order.
    std::mt19937_64 rng(ctx.seed() * 0x9E3779B97F4A7C15ull + uint64_t(layer) * 1000003u + uint64_t(kv_head));
    std::vector<float> scores(ctx.cache().head(layer, kv_head).size());
    for (float& s : scores) s = float(rng() >> 40);
    return scores;
  }
};

}  // namespace

PressInfo random_press() {
  return {"random",
          "keeps a uniformly random subset of the prompt (seeded by --seed)",
          {},
          [](const PressOptions&) { return std::make_unique<RandomPress>(); },
          {.block_eviction = BlockEviction::None,
           .budget_rule = BudgetRule::PerHead,
           .adakv_wraps = true,
           .multi_turn = MultiTurnRule::SelectAgain}};
}

}  // namespace kvslim
