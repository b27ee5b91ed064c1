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

void ScorerPress::keep(PressContext& ctx, int layer, int kv_head, std::span<const int32_t> indices) {
  ctx.keep(layer, kv_head, indices);
  after_keep(ctx, layer, kv_head, indices);
}

void ScorerPress::compress(PressContext& ctx) {
  PagedKvCache& cache = ctx.cache();
  std::vector<int64_t> budgets(cache.n_layers());
  bool over = false;
  for (int layer : cache.global_layers()) {
    budgets[layer] = layer_budget(ctx, layer);
    over = over ||
           (selection_ ? selection_->over_budget(ctx, layer, budgets[layer]) : cache.n_tokens(layer) > budgets[layer]);
  }
  if (!over) return;  // within budget: no extra forward pass (DapQ, LookaheadKV)
  prepare_scores(ctx);
  for (int layer : cache.global_layers()) compress_layer(ctx, layer, budgets[layer]);
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

void ScorerPress::evict_lowest_until_within_budget(PressContext& ctx,
                                                   const std::function<void(int, int)>& evict_lowest) {
  if (selection_) return compress(ctx);  // adakv chooses across the layer's heads
  PagedKvCache& cache = ctx.cache();
  for (int layer : cache.global_layers())
    for (int h = 0; h < cache.n_kv_heads(); ++h)
      while (cache.head(layer, h).size() > ctx.budget()) evict_lowest(layer, h);
}

int64_t largest_head(PagedKvCache& cache) {
  int64_t largest = 0;
  for (int layer : cache.global_layers()) largest = std::max(largest, cache.n_tokens(layer));
  return largest;
}

}  // namespace kvslim
