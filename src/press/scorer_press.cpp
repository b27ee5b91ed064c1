#include "press/scorer_press.h"

#include "press/select.h"

namespace kvslim {

std::vector<int32_t> ScorerPress::select(PressContext&, int, int, std::span<const float> scores, int64_t budget) {
  return top_k_ascending(scores, budget);
}

void ScorerPress::end_prefill(PressContext& ctx) {
  PagedKvCache& cache = ctx.cache();
  for (int layer = 0; layer < cache.n_layers(); ++layer)
    for (int h = 0; h < cache.n_kv_heads(); ++h) {
      if (cache.head(layer, h).size() <= ctx.budget()) continue;
      const std::vector<float> scores = score(ctx, layer, h);
      ctx.record_scores(layer, h, scores);
      ctx.keep(layer, h, select(ctx, layer, h, scores, ctx.budget()));
    }
}

}  // namespace kvslim
