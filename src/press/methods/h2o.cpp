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
#include "util/error.h"

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
  bool empty() const { return sums_.empty(); }

  // Multi-turn: each query head's sums follow its KV head's cache (tokens dropped by a rewind
  // go; the new turn's tokens start at zero as their rows arrive).
  void fit(PressContext& ctx, int64_t reserve) {
    const int group = ctx.config().group_size();
    for (int layer : ctx.cache().global_layers())
      for (int q = 0; q < n_heads_; ++q) {
        std::vector<float>& s = of(layer, q);
        s.resize(ctx.cache().head(layer, q / group).size(), 0.0f);
        s.reserve(reserve);
      }
  }

  void save(PressState& state) const {
    std::vector<float>& flat = state.f32["h2o.sums"];
    std::vector<int64_t>& sizes = state.i64["h2o.sizes"];
    for (const auto& s : sums_) {
      sizes.push_back(int64_t(s.size()));
      flat.insert(flat.end(), s.begin(), s.end());
    }
  }

  // Checks everything before changing anything: one array per (layer, query head), each as long
  // as its KV head's cache.
  void load(PressContext& ctx, const PressState& state) {
    const auto flat = state.f32.find("h2o.sums");
    const auto sizes = state.i64.find("h2o.sizes");
    if (flat == state.f32.end() || sizes == state.i64.end()) fail("h2o: the KV file holds no accumulators");
    const ModelConfig& config = ctx.config();
    const int group = config.group_size();
    if (sizes->second.size() != size_t(config.n_layers) * config.n_heads)
      fail("h2o: the KV file holds {} accumulators, the model has {} query heads", sizes->second.size(),
           size_t(config.n_layers) * config.n_heads);
    size_t total = 0;
    for (size_t i = 0; i < sizes->second.size(); ++i) {
      const int layer = int(i / config.n_heads), q = int(i % config.n_heads);
      if (sizes->second[i] != ctx.cache().head(layer, q / group).size())
        fail("h2o: accumulator of layer {} head {} has {} entries for {} cached tokens", layer, q, sizes->second[i],
             ctx.cache().head(layer, q / group).size());
      total += size_t(sizes->second[i]);
    }
    if (total != flat->second.size())
      fail("h2o: the KV file's accumulators hold {} values, not {}", flat->second.size(), total);
    n_heads_ = config.n_heads;
    sums_.assign(sizes->second.size(), {});
    size_t at = 0;
    for (size_t i = 0; i < sums_.size(); ++i) {
      sums_[i].assign(flat->second.begin() + at, flat->second.begin() + at + sizes->second[i]);
      at += size_t(sizes->second[i]);
    }
  }

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

  // Multi-turn: the attention each kept token received in earlier turns carries over; the new
  // turn's queries add theirs, then the usual selection runs over kept plus new tokens.
  void begin_turn(PressContext& ctx) override {
    if (sums_.empty()) return begin(ctx);
    int64_t largest = 0;
    for (int layer : ctx.cache().global_layers()) largest = std::max(largest, ctx.cache().n_tokens(layer));
    const int64_t turn = ctx.n_prompt() - ctx.n_past();
    sums_.fit(ctx, largest + turn + ctx.n_predict() + 1);
  }
  void rewind(PressContext& ctx) override {
    if (!sums_.empty()) sums_.fit(ctx, 0);
  }
  void save_state(PressState& state) const override { sums_.save(state); }
  void load_state(PressContext& ctx, const PressState& state) override { sums_.load(ctx, state); }

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
    evict_lowest_until_within_budget(ctx, [&](int layer, int h) { evict_lowest(ctx, layer, h); });
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
    keep(ctx, layer, kv_head, keep_);
  }

 protected:
  // Each query head's sums follow the eviction of its KV head.
  void after_keep(PressContext& ctx, int layer, int kv_head, std::span<const int32_t> keep) override {
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
  return {"h2o",
          "heavy hitters: attention received from every query so far, plus the most recent tokens",
          {{"recent", "0.5", "fraction of the budget kept for the most recent tokens (R = floor(recent * budget))"},
           {"decode", "true", "keep accumulating in decode and evict the lowest-scored non-recent token"},
           prefill_evict_option()},
          [](const PressOptions& o) {
            return std::make_unique<H2oPress>(o.get_double("recent", 0.0, 1.0), o.get_bool("decode"),
                                              block_eviction(o));
          },
          {.block_eviction = BlockEviction::Option,
           .budget_rule = BudgetRule::PerHead,
           .adakv_wraps = true,
           .multi_turn = MultiTurnRule::CarryOver}};
}

}  // namespace kvslim
