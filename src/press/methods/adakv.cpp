// adakv: adaptive per-head budgets (Ada-KV, Feng et al. 2024) over any score-based method
// (`adakv:<scorer>`, default snapkv): within a layer the H_kv * budget best scores are chosen
// jointly across the KV heads, each head first keeping its own top floor(floor * budget), so
// heads whose scores are concentrated give tokens to heads whose scores are spread out.
//
// Forced tokens: inner scorers score the tokens they always keep (SnapKV's window, H2O's recent
// tokens, KeyDiff's newest) as +inf, so they win both the per-head floor and the joint top.
// A head whose forced tokens alone fill the budget (budget <= window) keeps the inner scorer's
// own selection of `budget` tokens (the last ones; docs/methods.md, "Rules every method shares":
// a window larger than the budget) and takes exactly `budget` of the layer's total.
//
// The wrapped method runs unchanged: every hook (probes, begin, block ends, end of prefill, the
// appended rows DapQ and LookaheadKV score with, decode steps, the extended question, turns,
// rewinds, saved state) is forwarded to it (ForwardingPress), and adakv installs itself as its
// LayerSelection, so wherever the method would evict a layer (end of prefill, each prefill block
// with prefill=block, each KeyDiff block, each H2O/TOVA/KeyDiff decode step) the joint choice is
// made instead, with the method's own scores. A layer is compressed when it holds more than
// n_kv_heads * budget tokens in total (heads may hold more than the budget).
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/ranges.h>

#include "press/forwarding_press.h"
#include "press/methods.h"
#include "press/scorer_press.h"
#include "press/select.h"
#include "util/error.h"

namespace kvslim {

namespace {

class AdaKvPress final : public ForwardingPress, private LayerSelection {
 public:
  // prefill=block turns the scorer's block-wise eviction on (its probes follow the blocks and it
  // compresses after every block, through this selection).
  AdaKvPress(std::unique_ptr<Press> inner, ScorerPress& scorer, double floor, bool block)
      : ForwardingPress(std::move(inner)), floor_(floor) {
    if (block) scorer.set_block_eviction(true);
    scorer.set_layer_selection(this);
  }

  // LayerSelection: a layer is compressed when its heads together hold more than
  // n_kv_heads * budget tokens (one head may hold more than the budget).
  bool over_budget(PressContext& ctx, int layer, int64_t budget) const override {
    const PagedKvCache& cache = ctx.cache();
    int64_t total = 0;
    for (int h = 0; h < cache.n_kv_heads(); ++h) total += cache.head(layer, h).size();
    return total > int64_t(cache.n_kv_heads()) * budget;
  }

  // LayerSelection: the layer's n_kv_heads * budget best scores, each head first keeping its floor.
  void compress_layer(PressContext& ctx, ScorerPress& scorer, int layer, int64_t budget) override {
    if (!over_budget(ctx, layer, budget)) return;
    const PagedKvCache& cache = ctx.cache();
    const int n_heads = cache.n_kv_heads();

    const int64_t floor_count = std::min<int64_t>(budget, int64_t(std::floor(floor_ * double(budget))));
    int64_t remaining = int64_t(n_heads) * budget;
    std::vector<std::vector<float>> scores(n_heads);
    std::vector<std::vector<int32_t>> keep(n_heads);
    std::vector<Candidate> pool;
    for (int h = 0; h < n_heads; ++h) {
      scores[h] = scorer.score(ctx, layer, h);
      ctx.record_scores(layer, h, scores[h]);
      const int64_t forced = std::count(scores[h].begin(), scores[h].end(), std::numeric_limits<float>::infinity());
      if (forced >= budget) {
        keep[h] = scorer.select(ctx, layer, h, scores[h], budget);
        remaining -= int64_t(keep[h].size());
        continue;
      }
      keep[h] = top_k_ascending(scores[h], floor_count);
      remaining -= int64_t(keep[h].size());
      std::vector<bool> taken(scores[h].size(), false);
      for (int32_t i : keep[h]) taken[i] = true;
      for (size_t i = 0; i < scores[h].size(); ++i)
        if (!taken[i]) pool.push_back({scores[h][i], h, int32_t(i)});
    }

    // The joint top: higher score first, ties to the lower position, then the lower head.
    const size_t chosen = size_t(std::clamp<int64_t>(remaining, 0, int64_t(pool.size())));
    auto better = [](const Candidate& a, const Candidate& b) {
      if (a.score != b.score) return a.score > b.score;
      return a.index != b.index ? a.index < b.index : a.head < b.head;
    };
    std::nth_element(pool.begin(), pool.begin() + chosen, pool.end(), better);
    for (size_t i = 0; i < chosen; ++i) keep[pool[i].head].push_back(pool[i].index);

    for (int h = 0; h < n_heads; ++h) {
      std::sort(keep[h].begin(), keep[h].end());
      if (int64_t(keep[h].size()) < cache.head(layer, h).size()) scorer.keep(ctx, layer, h, keep[h]);
    }
  }

 private:
  struct Candidate {
    float score;
    int32_t head, index;
  };

  double floor_;
};

std::vector<std::string> split_options(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    if (comma > start) out.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

std::unique_ptr<Press> make_adakv(const PressOptions& o) {
  const std::string name = o.get_string("scorer");
  const double floor = o.get_double("floor", 0.0, 1.0);
  const bool block = block_eviction(o);
  if (name == "adakv") fail("adakv: option scorer=adakv: 'adakv' cannot wrap itself");
  for (const PressInfo& info : press_registry()) {
    if (info.name != name) continue;
    // The registry says which methods are score-based; the cast reaches the scorer's interface.
    if (!info.can.adakv_wraps)
      fail("adakv: option scorer={}: '{}' is not a score-based method (it cannot be wrapped)", name, name);
    std::unique_ptr<Press> inner =
        info.make(PressOptions(info.name, info.options, split_options(o.get_string("inner"))));
    auto* scorer = dynamic_cast<ScorerPress*>(inner.get());
    if (!scorer) fail("adakv: internal error: '{}' is registered as wrappable but has no scores", name);
    return std::make_unique<AdaKvPress>(std::move(inner), *scorer, floor, block);
  }
  std::vector<std::string> names;
  for (const PressInfo& info : press_registry()) names.push_back(info.name);
  fail("adakv: option scorer={}: unknown method (valid: {})", name, fmt::join(names, ", "));
}

}  // namespace

PressInfo adakv_press() {
  return {"adakv",
          "adaptive per-head budgets: the layer's best scores across KV heads, with a per-head floor",
          {{"scorer", "snapkv", "score-based method to wrap (also `adakv:<scorer>`)"},
           {"inner", "", "the scorer's options, comma-separated key=value (e.g. window=16,kernel=5)"},
           {"floor", "0.2", "each head keeps at least floor(floor * budget) of its own best tokens"},
           prefill_evict_option()},
          make_adakv,
          {.block_eviction = BlockEviction::Option,
           .budget_rule = BudgetRule::PerLayer,
           .adakv_wraps = false,
           .multi_turn = MultiTurnRule::SelectAgain}};
}

}  // namespace kvslim
