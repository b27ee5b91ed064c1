// The common shape of score-based methods (as kvpress's ScorerPress): score every cached token of
// each (layer, KV head), keep the best `budget`. Subclasses write score() and, when they force
// sinks or windows, select(); they evict through compress() (or compress_layer() with a
// per-layer budget) from whichever hooks they evict in (end of prefill, block ends, decode steps),
// so that a wrapper choosing across heads (adakv) can take over the choice while every hook of the
// method still runs.
#pragma once

#include <span>
#include <vector>

#include "press/press.h"

namespace kvslim {

class ScorerPress;

// Chooses the kept tokens of one layer in place of the per-head default (adakv installs one).
class LayerSelection {
 public:
  virtual ~LayerSelection() = default;
  // Called whenever `scorer` would evict in `layer` (whatever the hook); scores through
  // scorer.score() and evicts through scorer.keep(); does nothing when the layer is within
  // budget.
  virtual void compress_layer(PressContext& ctx, ScorerPress& scorer, int layer, int64_t budget) = 0;
};

class ScorerPress : public Press {
 public:
  // One score per cached token of (layer, kv_head); higher means keep.
  virtual std::vector<float> score(PressContext& ctx, int layer, int kv_head) = 0;
  // Which tokens to keep given the scores; default: the top `budget`.
  virtual std::vector<int32_t> select(PressContext& ctx, int layer, int kv_head, std::span<const float> scores,
                                      int64_t budget);

  // Evicts one head down to `indices` (ascending cache indices) and lets the method's per-token
  // state follow (after_keep).
  void keep(PressContext& ctx, int layer, int kv_head, std::span<const int32_t> indices);

  // Heads holding more than the budget are scored and evicted; budget >= prompt is a no-op.
  void end_prefill(PressContext& ctx) override { compress(ctx); }

  // Hands the choice of kept tokens to `selection` (null: back to the per-head default).
  void set_layer_selection(LayerSelection* selection) { selection_ = selection; }

 protected:
  // Every layer with the context's budget.
  void compress(PressContext& ctx);
  // One layer with `budget` tokens per head: the installed selection, or each head above the
  // budget scored, recorded and cut to select()'s choice.
  void compress_layer(PressContext& ctx, int layer, int64_t budget);
  // True when a wrapper chooses the kept tokens: methods with a faster per-step path of their
  // own (evict the single lowest) must go through compress() instead.
  bool selection_installed() const { return selection_ != nullptr; }
  // After each eviction of (layer, kv_head) to `kept`: state indexed by cache index follows.
  virtual void after_keep(PressContext& ctx, int layer, int kv_head, std::span<const int32_t> kept) {}

 private:
  LayerSelection* selection_ = nullptr;
};

}  // namespace kvslim
