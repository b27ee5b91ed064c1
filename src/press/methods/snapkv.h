// SnapKV (SnapKV §4.2; the method snapkv is methods/snapkv.cpp), whose scorer pyramidkv and laq
// reuse: the last `window` prompt queries vote with their attention probabilities on the prefix
// (summed over the window, group mean), the votes are pooled along the sequence, and the window
// itself is always kept.
#pragma once

#include <string>
#include <vector>

#include "press/attention_accumulator.h"
#include "press/options.h"
#include "press/scorer_press.h"
#include "press/select.h"

namespace kvslim {

struct SnapKvSettings {
  int window = 32;
  int kernel = 7;
  PoolKind pooling = PoolKind::Max;
  bool block = false;  // prefill=block: evict after every prefill block, the block's last queries voting
};

// The options window, kernel and pooling with SnapKV's defaults.
std::vector<OptionSpec> snapkv_option_specs();
// Reads and validates them; errors name o.method().
SnapKvSettings snapkv_settings(const PressOptions& o);

// A ScorerPress keeping the window plus the top (budget - window) prefix tokens by pooled votes.
class SnapKvScorer : public ScorerPress {
 public:
  SnapKvScorer(std::string method, const SnapKvSettings& settings) : method_(std::move(method)), s_(settings) {
    set_block_eviction(settings.block);
  }

  AttentionProbe* prefill_probe() override { return &votes_; }
  void check_budget(int64_t budget) const override;
  void begin(PressContext& ctx) override;
  void before_prefill_block(PressContext& ctx, int64_t n_tokens) override;

  // Pooled votes for the prefix [0, n - window); the window's tokens score +inf (always kept,
  // which wrappers such as adakv rely on).
  std::vector<float> score(PressContext& ctx, int layer, int kv_head) override;
  std::vector<int32_t> select(PressContext& ctx, int layer, int kv_head, std::span<const float> scores,
                              int64_t budget) override;

  int window() const { return s_.window; }

 private:
  std::string method_;
  SnapKvSettings s_;
  AttentionAccumulator votes_;
};

}  // namespace kvslim
