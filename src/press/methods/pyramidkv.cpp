// pyramidkv: SnapKV's scores with per-layer budgets that shrink linearly with depth (PyramidKV
// §3.3): with b = budget - window, min = b/β and max = 2b - min, layer l of L keeps
// max - l*(max - min)/(L - 1) prefix tokens plus the window, so the layers together keep L*budget.
#include <algorithm>

#include "press/methods.h"
#include "press/methods/snapkv.h"
#include "util/error.h"

namespace kvslim {

namespace {

// Prefix tokens per layer, summing to n_layers * b: layer l's exact share is
// b * ((2β-1)(L-1) - 2(β-1)l) / (β(L-1)) (integer arithmetic, so no rounding drift); shares
// are floored and the remainder goes one each to the largest fractional parts (ties: lower layer).
std::vector<int64_t> pyramid_prefix_budgets(int n_layers, int64_t b, int beta) {
  if (n_layers == 1) return {b};
  const int64_t den = int64_t(beta) * (n_layers - 1);
  std::vector<int64_t> budgets(n_layers), fractions(n_layers);
  int64_t total = 0;
  for (int l = 0; l < n_layers; ++l) {
    const int64_t num = b * ((2 * int64_t(beta) - 1) * (n_layers - 1) - 2 * int64_t(beta - 1) * l);
    budgets[l] = num / den;
    fractions[l] = num % den;
    total += budgets[l];
  }
  std::vector<int> order(n_layers);
  for (int l = 0; l < n_layers; ++l) order[l] = l;
  std::stable_sort(order.begin(), order.end(), [&](int a, int c) { return fractions[a] > fractions[c]; });
  for (int64_t i = 0; i < int64_t(n_layers) * b - total; ++i) ++budgets[order[i]];
  return budgets;
}

class PyramidKvPress final : public SnapKvScorer {
 public:
  PyramidKvPress(const SnapKvSettings& settings, int beta) : SnapKvScorer("pyramidkv", settings), beta_(beta) {}

  // Each layer's own budget, at the end of prefill and, block-wise, after every block (a head of
  // layer l holds at most layer_budget(l) + block tokens; the layers' budgets sum to L * budget).
  // A prompt within the budget is left whole; a budget that cannot hold the window keeps the last
  // `budget` tokens in every layer.
  // Its first layers keep more than the budget (up to about twice): a turn's room is not
  // budget + block, so Session::check_turn_fits asks for the whole turn.
  bool evicts_each_prefill_block() const override { return false; }

  int64_t layer_budget(PressContext& ctx, int layer) override {
    const int64_t budget = ctx.budget();
    const int64_t b = budget - window();
    if (ctx.n_prompt() <= budget || b <= 0) return budget;
    // The pyramid spans the layers the method governs: on a model with sliding-window layers
    // (gemma3), its global layers in order (the first global layer gets the largest budget).
    const std::vector<int>& layers = ctx.cache().global_layers();
    const auto rank = std::find(layers.begin(), layers.end(), layer) - layers.begin();
    return pyramid_prefix_budgets(int(layers.size()), b, beta_)[size_t(rank)] + window();
  }

 private:
  int beta_;
};

}  // namespace

PressInfo pyramidkv_press() {
  std::vector<OptionSpec> options = snapkv_option_specs();
  options.push_back(
      {"beta", "20", "β: the last layer keeps b/β prefix tokens, the first 2b - b/β (b = budget - window)"});
  options.push_back(prefill_evict_option());
  return {"pyramidkv",
          "SnapKV scores with per-layer budgets decreasing linearly with depth",
          options,
          [](const PressOptions& o) {
            SnapKvSettings settings = snapkv_settings(o);
            settings.block = block_eviction(o);
            return std::make_unique<PyramidKvPress>(settings, o.get_int("beta", 1, 1 << 20));
          },
          {.block_eviction = BlockEviction::Option,
           .budget_rule = BudgetRule::PerModel,
           .adakv_wraps = true,
           .multi_turn = MultiTurnRule::SelectAgain}};
}

}  // namespace kvslim
