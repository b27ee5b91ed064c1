// The common shape of prefill-time methods (as kvpress's ScorerPress): score every cached prompt
// token of each (layer, KV head) once the prompt is cached, keep the best `budget`. Subclasses
// write score() and, when they force sinks or windows, select().
//
// Block-wise prefill eviction (option prefill=block, --prefill-evict block): the same scoring and
// selection run after every prefill block instead of once at the end, over what the head holds
// then (the kept tokens plus the block), so a head never holds more than budget + block tokens.
// Each method's block-wise rule is written down in docs/kv-cache.md.
#pragma once

#include <span>
#include <vector>

#include "press/options.h"
#include "press/press.h"

namespace kvslim {

// The option `prefill` (end or block) of the methods that can evict block by block.
OptionSpec prefill_evict_option();
// True for prefill=block.
bool block_eviction(const PressOptions& o);

class ScorerPress : public Press {
 public:
  // One score per cached token of (layer, kv_head); higher means keep.
  virtual std::vector<float> score(PressContext& ctx, int layer, int kv_head) = 0;
  // Which tokens to keep given the scores; default: the top `budget`.
  virtual std::vector<int32_t> select(PressContext& ctx, int layer, int kv_head, std::span<const float> scores,
                                      int64_t budget);
  // Runs whatever score() needs once the tokens to rank are cached and some head is over the
  // budget (DapQ's and LookaheadKV's extra forward rows). Default: nothing.
  virtual void prepare_scores(PressContext& ctx) {}
  // Keeps `keep` of (layer, kv_head) and lets per-token state follow (kept()).
  void keep_tokens(PressContext& ctx, int layer, int kv_head, std::span<const int32_t> keep);

  // Heads holding more than the budget are scored and evicted; budget >= prompt is a no-op.
  virtual void evict_to_budget(PressContext& ctx);
  void end_prefill(PressContext& ctx) override { evict_to_budget(ctx); }
  // With block eviction, every prefill block ends with evict_to_budget.
  void after_prefill_block(PressContext& ctx) override {
    if (block_) evict_to_budget(ctx);
  }

  // Block-wise eviction on or off (a wrapper such as adakv turns its scorer's on so that the
  // scorer's probes follow the blocks, and evicts itself).
  void set_block_eviction(bool on) { block_ = on; }
  bool block_eviction() const { return block_; }

 protected:
  // After tokens of (layer, kv_head) were evicted: state indexed by cache index follows (H2O).
  virtual void kept(PressContext& ctx, int layer, int kv_head, std::span<const int32_t> keep) {}

  bool block_ = false;
};

// The largest head of the cache (tokens).
int64_t largest_head(PagedKvCache& cache);

}  // namespace kvslim
