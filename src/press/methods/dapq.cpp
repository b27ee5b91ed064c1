// dapq: position-aware pseudo queries (DapQ, §4). After prefill, `a + b` pseudo tokens (the
// prompt's first `a` and last `b` ids, §5.1 "Implementation Details") run as a continuation at
// the positions the response will occupy, n .. n+w-1 (§4.1); their attention on the prompt, summed over
// the pseudo queries, group mean and pooled as SnapKV, ranks every prompt token; the top
// `budget` are kept (no forced window) and the pseudo tokens' KV is dropped (§4.2).
#include <algorithm>

#include "press/attention_accumulator.h"
#include "press/methods.h"
#include "press/scorer_press.h"
#include "press/select.h"
#include "util/error.h"

namespace kvslim {

namespace {

class DapqPress final : public ScorerPress {
 public:
  DapqPress(int first, int last, int kernel, PoolKind pooling, bool block)
      : first_(first), last_(last), kernel_(kernel), pooling_(pooling) {
    set_block_eviction(block);
  }

  // Runs only when some head is over the budget (no extra forward pass otherwise): one extra
  // forward of w rows at positions n_past() .. n_past()+w-1; the probe sums their rows over the
  // cached keys (the pseudo keys themselves are not scored). Block-wise this runs after every
  // block that leaves a head over the budget, the pseudo tokens taken from the prompt so far.
  void prepare_scores(PressContext& ctx) override {
    votes_.reset(ctx.config(), largest_head(ctx.cache()), ctx.n_past());
    const std::vector<int32_t> so_far(ctx.prompt().begin(),
                                      ctx.prompt().begin() + std::min(ctx.n_past(), ctx.n_prompt()));
    ctx.run_appended(pseudo_tokens(so_far), &votes_);
  }

  // §4.2 Eq. 4: pseudo queries' attention on each prompt token, group mean, pooled.
  std::vector<float> score(PressContext& ctx, int layer, int kv_head) override {
    std::vector<float> votes = votes_.group_mean(layer, kv_head);
    votes.resize(ctx.cache().head(layer, kv_head).size());
    return pool1d(votes, kernel_, pooling_);
  }

 private:
  // The first `a` and the last `b` prompt ids; a prompt shorter than either part gives all of
  // its ids to that part.
  std::vector<int32_t> pseudo_tokens(const std::vector<int32_t>& prompt) const {
    const size_t a = std::min<size_t>(first_, prompt.size()), b = std::min<size_t>(last_, prompt.size());
    std::vector<int32_t> tokens(prompt.begin(), prompt.begin() + a);
    tokens.insert(tokens.end(), prompt.end() - b, prompt.end());
    return tokens;
  }

  int first_, last_, kernel_;
  PoolKind pooling_;
  AttentionAccumulator votes_;
};

}  // namespace

PressInfo dapq_press() {
  return {"dapq",
          "pseudo queries (first and last prompt ids) at the response's positions vote; keeps the top tokens",
          {{"a", "4", "pseudo tokens taken from the start of the prompt"},
           {"b", "28", "pseudo tokens taken from the end of the prompt"},
           {"kernel", "7", "pooling kernel (odd)"},
           {"pooling", "max", "max, avg or none"},
           prefill_evict_option()},
          [](const PressOptions& o) {
            const int a = o.get_int("a", 0, 1 << 16), b = o.get_int("b", 0, 1 << 16);
            if (a + b < 1) fail("dapq: options a={} and b={} give no pseudo token (a + b must be >= 1)", a, b);
            const int kernel = o.get_int("kernel", 1, 4095);
            if (kernel % 2 == 0) fail("dapq: option kernel={} must be odd", kernel);
            return std::make_unique<DapqPress>(
                a, b, kernel, pool_kind_from_name(o.get_choice("pooling", {"max", "avg", "none"})), block_eviction(o));
          },
          {.block_eviction = BlockEviction::Option,
           .budget_rule = BudgetRule::PerHead,
           .adakv_wraps = true,
           .multi_turn = MultiTurnRule::SelectAgain}};
}

}  // namespace kvslim
