// The common shape of score-based methods (as kvpress's ScorerPress): score every cached token of
// each (layer, KV head), keep the best `budget`. Subclasses write score() and, when they force
// sinks or windows, select(); they evict through compress() (per-layer budgets: layer_budget())
// from whichever hooks they evict in (end of prefill, block ends, decode steps), so that a
// wrapper choosing across heads (adakv) can take over the choice while every hook of the method
// still runs.
//
// Block-wise prefill eviction (option prefill=block, --prefill-evict block): the same scoring and
// selection run after every prefill block instead of once at the end, over what the head holds
// then (the kept tokens plus the block), so a head never holds more than budget + block tokens.
// Each method's block-wise rule is written down in docs/kv-cache.md.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "press/options.h"
#include "press/press.h"

namespace kvslim {

// The option `prefill` (end or block) of the methods that can evict block by block.
OptionSpec prefill_evict_option();
// True for prefill=block.
bool block_eviction(const PressOptions& o);

class ScorerPress;

// Chooses the kept tokens of one layer in place of the per-head default (adakv installs one).
class LayerSelection {
 public:
  virtual ~LayerSelection() = default;
  // True when compress_layer would evict in `layer` (decides whether the scorer's extra forward
  // rows, prepare_scores(), are worth running).
  virtual bool over_budget(PressContext& ctx, int layer, int64_t budget) const = 0;
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
  // Runs whatever score() needs once the tokens to rank are cached and some layer is over its
  // budget (DapQ's and LookaheadKV's extra forward rows). Default: nothing.
  virtual void prepare_scores(PressContext& ctx) {}

  // Evicts one head down to `indices` (ascending cache indices) and lets the method's per-token
  // state follow (after_keep).
  void keep(PressContext& ctx, int layer, int kv_head, std::span<const int32_t> indices);

  // Heads holding more than the budget are scored and evicted; budget >= prompt is a no-op.
  void end_prefill(PressContext& ctx) override { compress(ctx); }
  // With block eviction, every prefill block ends with compress().
  void after_prefill_block(PressContext& ctx) override {
    if (block_) compress(ctx);
  }

  // Block-wise eviction on or off (a wrapper such as adakv turns its scorer's on).
  void set_block_eviction(bool on) { block_ = on; }
  bool block_eviction() const { return block_; }
  bool evicts_each_prefill_block() const override { return block_ || Press::evicts_each_prefill_block(); }

  // Hands the choice of kept tokens to `selection` (null: back to the per-head default).
  void set_layer_selection(LayerSelection* selection) { selection_ = selection; }

 protected:
  // Every layer with layer_budget(): when some layer is over it, prepare_scores() runs once,
  // then each layer goes through compress_layer().
  void compress(PressContext& ctx);
  // Tokens per head of `layer`; default: the context's budget (PyramidKV: its own per layer).
  virtual int64_t layer_budget(PressContext& ctx, int layer) { return ctx.budget(); }
  // One layer with `budget` tokens per head: the installed selection, or each head above the
  // budget scored, recorded and cut to select()'s choice.
  void compress_layer(PressContext& ctx, int layer, int64_t budget);
  // True when a wrapper chooses the kept tokens: methods with a faster per-step path of their
  // own (evict the single lowest) must go through compress() instead.
  bool selection_installed() const { return selection_ != nullptr; }
  // Decode-time eviction of the methods that drop one token per step (H2O, KeyDiff): each head
  // above the context's budget drops one token at a time through evict_lowest(layer, kv_head)
  // (the method's lowest-scored, evicted through keep(), with buffers reused per step) until
  // within it; with a layer selection installed (adakv), compress() chooses instead.
  void evict_lowest_until_within_budget(PressContext& ctx, const std::function<void(int, int)>& evict_lowest);
  // After each eviction of (layer, kv_head) to `kept`: state indexed by cache index follows.
  virtual void after_keep(PressContext& ctx, int layer, int kv_head, std::span<const int32_t> kept) {}

  bool block_ = false;

 private:
  LayerSelection* selection_ = nullptr;
};

// The largest head of the cache (tokens).
int64_t largest_head(PagedKvCache& cache);

}  // namespace kvslim
