#include "press/scorer_press.h"

#include <algorithm>

#include "press/select.h"

namespace kvslim {

OptionSpec prefill_evict_option() {
  return {"prefill", "end",
          "end: evict once the prompt is cached (the paper's setting); block: after every prefill block, so a head "
          "holds at most budget + block tokens (docs/kv-cache.md)"};
}

bool block_eviction(const PressOptions& o) { return o.get_choice("prefill", {"end", "block"}) == "block"; }

std::vector<int32_t> ScorerPress::select(PressContext&, int, int, std::span<const float> scores, int64_t budget) {
  return top_k_ascending(scores, budget);
}

void ScorerPress::keep_tokens(PressContext& ctx, int layer, int kv_head, std::span<const int32_t> keep) {
  ctx.keep(layer, kv_head, keep);
  kept(ctx, layer, kv_head, keep);
}

void ScorerPress::evict_to_budget(PressContext& ctx) {
  if (!cache_exceeds_budget(ctx)) return;
  prepare_scores(ctx);
  PagedKvCache& cache = ctx.cache();
  for (int layer = 0; layer < cache.n_layers(); ++layer)
    for (int h = 0; h < cache.n_kv_heads(); ++h) {
      if (cache.head(layer, h).size() <= ctx.budget()) continue;
      const std::vector<float> scores = score(ctx, layer, h);
      ctx.record_scores(layer, h, scores);
      keep_tokens(ctx, layer, h, select(ctx, layer, h, scores, ctx.budget()));
    }
}

int64_t largest_head(PagedKvCache& cache) {
  int64_t largest = 0;
  for (int layer = 0; layer < cache.n_layers(); ++layer) largest = std::max(largest, cache.n_tokens(layer));
  return largest;
}

}  // namespace kvslim
