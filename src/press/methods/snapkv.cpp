// snapkv (SnapKV §4.2): the last `window` prompt queries vote with their attention probabilities
// on the prefix (summed over the window, group mean), the votes are pooled along the sequence, and
// the window plus the top (budget - window) prefix tokens are kept. SnapKvScorer (snapkv.h) is
// also the scorer of pyramidkv, laq's draft, adakv's default and the LookaheadKV trainer's baseline.
#include "press/methods/snapkv.h"

#include <algorithm>
#include <limits>

#include "press/methods.h"
#include "util/error.h"

namespace kvslim {

std::vector<OptionSpec> snapkv_option_specs() {
  return {{"window", "32", "observation window: last prompt queries"},
          {"kernel", "7", "pooling kernel (odd)"},
          {"pooling", "max", "max, avg or none"}};
}

SnapKvSettings snapkv_settings(const PressOptions& o) {
  SnapKvSettings s;
  s.kernel = o.get_int("kernel", 1, 4095);
  if (s.kernel % 2 == 0) fail("{}: option kernel={} must be odd", o.method(), s.kernel);
  s.window = o.get_int("window", 1, 1 << 20);
  s.pooling = pool_kind_from_name(o.get_choice("pooling", {"max", "avg", "none"}));
  return s;
}

void SnapKvScorer::check_budget(int64_t budget) const {
  if (s_.window > budget) fail("{}: window {} exceeds the budget {}", method_, s_.window, budget);
}

void SnapKvScorer::begin(PressContext& ctx) {
  // Block-wise, the votes are sized per block (before_prefill_block), never for the whole prompt.
  if (!block_) votes_.reset(ctx.config(), ctx.n_prompt(), ctx.n_prompt() - s_.window);
}

void SnapKvScorer::before_prefill_block(PressContext& ctx, int64_t n_tokens) {
  // The block's last `window` queries vote over every token a head can hold during the block.
  if (block_) votes_.reset(ctx.config(), largest_head(ctx.cache()) + n_tokens, ctx.n_past() + n_tokens - s_.window);
}

std::vector<float> SnapKvScorer::score(PressContext& ctx, int layer, int kv_head) {
  const int64_t n = ctx.cache().head(layer, kv_head).size();
  std::vector<float> votes = votes_.group_mean(layer, kv_head);
  votes.resize(n);
  const int64_t prefix = std::max<int64_t>(0, n - s_.window);
  std::vector<float> scores = pool1d(std::span<const float>(votes).first(prefix), s_.kernel, s_.pooling);
  scores.resize(n, std::numeric_limits<float>::infinity());
  return scores;
}

std::vector<int32_t> SnapKvScorer::select(PressContext&, int, int, std::span<const float> scores, int64_t budget) {
  const int64_t n = int64_t(scores.size());
  return window_plus_top(scores.first(std::max<int64_t>(0, n - s_.window)), n, s_.window, budget);
}

PressInfo snapkv_press() {
  return {"snapkv",
          "window queries vote on the prefix (pooled); keeps the window plus the top prefix tokens",
          [] {
            std::vector<OptionSpec> specs = snapkv_option_specs();
            specs.push_back(prefill_evict_option());
            return specs;
          }(),
          [](const PressOptions& o) {
            SnapKvSettings settings = snapkv_settings(o);
            settings.block = block_eviction(o);
            return std::make_unique<SnapKvScorer>("snapkv", settings);
          },
          {.block_eviction = BlockEviction::Option,
           .budget_rule = BudgetRule::PerHead,
           .adakv_wraps = true,
           .multi_turn = MultiTurnRule::SelectAgain}};
}

}  // namespace kvslim
