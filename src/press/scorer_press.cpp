#include "press/scorer_press.h"

#include "press/select.h"

namespace kvslim {

std::vector<int32_t> ScorerPress::select(PressContext&, int, int, std::span<const float> scores, int64_t budget) {
  return top_k_ascending(scores, budget);
}

void ScorerPress::keep(PressContext& ctx, int layer, int kv_head, std::span<const int32_t> indices) {
  ctx.keep(layer, kv_head, indices);
  after_keep(ctx, layer, kv_head, indices);
}

void ScorerPress::compress(PressContext& ctx) {
  for (int layer = 0; layer < ctx.cache().n_layers(); ++layer) compress_layer(ctx, layer, ctx.budget());
}

void ScorerPress::compress_layer(PressContext& ctx, int layer, int64_t budget) {
  if (selection_) return selection_->compress_layer(ctx, *this, layer, budget);
  PagedKvCache& cache = ctx.cache();
  for (int h = 0; h < cache.n_kv_heads(); ++h) {
    if (cache.head(layer, h).size() <= budget) continue;
    const std::vector<float> scores = score(ctx, layer, h);
    ctx.record_scores(layer, h, scores);
    keep(ctx, layer, h, select(ctx, layer, h, scores, budget));
  }
}

}  // namespace kvslim
