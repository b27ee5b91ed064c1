// h2o: Heavy-Hitter Oracle (H2O §4.1). A token's score is the attention it has received from
// every query so far (the column sums of the causal attention matrix, summed as the rows stream
// past, never materialised; group mean). Keep the `recent` most recent tokens plus the top
// (budget - recent) by score; in decode keep accumulating and, whenever a head exceeds the
// budget, evict its lowest-scored non-recent token.
#include <algorithm>
#include <cmath>
#include <limits>

#include "press/methods.h"
#include "press/select.h"
#include "press/scorer_press.h"

namespace kvslim {

namespace {

// Attention received per (layer, query head), indexed like the KV head's cache: the press
// compacts these arrays whenever it evicts, so index i is always cached token i.
class ColumnSums final : public AttentionProbe {
 public:
  void reset(const ModelConfig& config, int64_t n_tokens, int64_t capacity) {
    n_heads_ = config.n_heads;
    sums_.assign(size_t(config.n_layers) * n_heads_, {});
    for (auto& s : sums_) {
      s.reserve(capacity);  // decode appends without allocating
      s.assign(n_tokens, 0.0f);
    }
  }

  // A decode row covers one token more than the sums: the new token starts at zero.
  void on_row(int layer, int q_head, int64_t, const float* probs, int64_t n_visible) override {
    std::vector<float>& s = of(layer, q_head);
    if (int64_t(s.size()) < n_visible) s.resize(n_visible, 0.0f);
    for (int64_t j = 0; j < n_visible; ++j) s[j] += probs[j];
  }

  std::vector<float>& of(int layer, int q_head) { return sums_[size_t(layer) * n_heads_ + q_head]; }

 private:
  int n_heads_ = 0;
  std::vector<std::vector<float>> sums_;  // [layer][q head][cached token]
};

class H2oPress final : public ScorerPress {
 public:
  H2oPress(double recent, bool decode, bool block) : recent_(recent), decode_(decode) { set_block_eviction(block); }

  AttentionProbe* prefill_probe() override { return &sums_; }
  AttentionProbe* decode_probe() override { return decode_ ? &sums_ : nullptr; }

  void begin(PressContext& ctx) override {
    const int64_t n = ctx.n_prompt();
    if (block_) {
      // Block-wise the sums grow with each block's rows and are compacted at every eviction, so
      // they are never sized for the whole prompt.
      sums_.reset(ctx.config(), 0, std::min(n, ctx.budget()) + 1);
      return;
    }
    const int64_t largest_head = std::max(n, std::min(ctx.budget(), n + ctx.n_predict()));
    sums_.reset(ctx.config(), n, decode_ ? largest_head + 1 : n);
  }

  // Group mean of the received attention; the most recent tokens score +inf (always kept).
  std::vector<float> score(PressContext& ctx, int layer, int kv_head) override {
    std::vector<float> scores;
    group_mean(ctx, layer, kv_head, scores);
    const int64_t n = int64_t(scores.size());
    for (int64_t i = n - recent_count(n, ctx.budget()); i < n; ++i) scores[i] = std::numeric_limits<float>::infinity();
    return scores;
  }

  void after_decode_step(PressContext& ctx) override {
    if (!decode_) return;
    PagedKvCache& cache = ctx.cache();
    for (int layer = 0; layer < cache.n_layers(); ++layer)
      for (int h = 0; h < cache.n_kv_heads(); ++h)
        while (cache.head(layer, h).size() > ctx.budget()) evict_lowest(ctx, layer, h);
  }

 private:
  // R = floor(recent * budget), at most n.
  int64_t recent_count(int64_t n, int64_t budget) const {
    const double r = std::floor(recent_ * double(budget));
    return r >= double(n) ? n : int64_t(r);
  }

  void group_mean(PressContext& ctx, int layer, int kv_head, std::vector<float>& out) {
    const int group = ctx.config().group_size();
    out.assign(ctx.cache().head(layer, kv_head).size(), 0.0f);
    for (int g = 0; g < group; ++g) {
      const std::vector<float>& s = sums_.of(layer, kv_head * group + g);
      for (size_t i = 0; i < out.size(); ++i) out[i] += s[i];
    }
    for (float& m : out) m /= float(group);
  }

  // Evicts the lowest-scored token outside the recent window (ties: the higher position goes,
  // as top-k keeps the lower one). Reuses member buffers: no allocation per step.
  void evict_lowest(PressContext& ctx, int layer, int kv_head) {
    group_mean(ctx, layer, kv_head, mean_);
    const int64_t n = int64_t(mean_.size());
    all_but_lowest(mean_, n - recent_count(n, ctx.budget()), keep_);
    keep_tokens(ctx, layer, kv_head, keep_);
  }

 protected:
  // Each query head's sums follow the eviction of its KV head.
  void kept(PressContext& ctx, int layer, int kv_head, std::span<const int32_t> keep) override {
    const int group = ctx.config().group_size();
    for (int g = 0; g < group; ++g) {
      std::vector<float>& s = sums_.of(layer, kv_head * group + g);
      for (size_t i = 0; i < keep.size(); ++i) s[i] = s[keep[i]];
      s.resize(keep.size());
    }
  }

 private:
  double recent_;
  bool decode_;
  ColumnSums sums_;
  std::vector<float> mean_;    // reused every decode step
  std::vector<int32_t> keep_;  // reused every decode step
};

}  // namespace

PressInfo h2o_press() {
  return {"h2o", "heavy hitters: attention received from every query so far, plus the most recent tokens",
          {{"recent", "0.5", "fraction of the budget kept for the most recent tokens (R = floor(recent * budget))"},
           {"decode", "true", "keep accumulating in decode and evict the lowest-scored non-recent token"},
           prefill_evict_option()},
          [](const PressOptions& o) {
            return std::make_unique<H2oPress>(o.get_double("recent", 0.0, 1.0), o.get_bool("decode"), block_eviction(o));
          }};
}

}  // namespace kvslim
