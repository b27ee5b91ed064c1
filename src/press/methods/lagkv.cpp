// lagkv: query-free, attention-free compression from lag-relative statistics (LagKV §2.2). After
// `sink` tokens the cache is cut into partitions of `lag` tokens; each partition is scored
// against the next one (per-channel min/max of its K and V), and the top `rho * lag` of it are
// kept. Recursive mode (default) compresses whenever a layer holds two partitions past its
// compressed region, so it ignores --budget: what is kept follows from `rho` alone. One-shot
// mode (kvpress style) ranks the same scores once for a target budget.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "press/methods.h"
#include "press/select.h"
#include "util/error.h"

namespace kvslim {

namespace {

class LagKvPress final : public Press {
 public:
  LagKvPress(int sink, int lag, double rho, double value_weight, bool oneshot, bool every_block)
      : sink_(sink),
        lag_(lag),
        keep_per_partition_(int(std::floor(rho * lag))),
        value_weight_(float(value_weight)),
        oneshot_(oneshot),
        every_block_(every_block) {}

  void begin(PressContext& ctx) override { base_.assign(ctx.config().n_layers, sink_); }

  // Multi-turn: recursive compression just continues (the compressed regions stay, the new
  // turn's tokens are partitioned after them); one-shot mode ranks again over kept plus new.
  void begin_turn(PressContext& ctx) override {
    if (base_.empty()) begin(ctx);
  }
  // A rewound history can end inside a compressed region: the region ends where the cache does.
  void rewind(PressContext& ctx) override {
    for (size_t layer = 0; layer < base_.size(); ++layer)
      base_[layer] = std::min(base_[layer], std::max<int64_t>(sink_, ctx.cache().head(int(layer), 0).size()));
  }
  void save_state(PressState& state) const override { state.i64["lagkv.base"] = base_; }
  void load_state(PressContext& ctx, const PressState& state) override {
    const auto it = state.i64.find("lagkv.base");
    if (it == state.i64.end() || it->second.size() != size_t(ctx.config().n_layers))
      fail("lagkv: the KV file holds no compressed region per layer");
    for (int64_t b : it->second)
      if (b < 0) fail("lagkv: the KV file holds a negative compressed region");
    base_ = it->second;
  }

  // The paper's chunk-by-chunk prefill (LagKV §4.3), with option every_block.
  void after_prefill_block(PressContext& ctx) override {
    if (!oneshot_ && every_block_) compress_recursive(ctx);
  }

  void end_prefill(PressContext& ctx) override {
    if (oneshot_)
      compress_oneshot(ctx);
    else if (!every_block_)
      compress_recursive(ctx);
  }

  // Fires again each time a layer gains `lag` tokens past its last compression.
  void after_decode_step(PressContext& ctx) override {
    if (!oneshot_) compress_recursive(ctx);
  }

 private:
  // LagKV §2.2: a layer of T tokens with T >= base + 2L holds P = floor((T - base) / L) full
  // partitions after its compressed region; partitions 0 .. P-2 are compressed against their
  // successor, the last full partition and the remainder stay verbatim. Every head of a layer
  // keeps the same count, so one `base` per layer describes them all.
  void compress_recursive(PressContext& ctx) {
    PagedKvCache& cache = ctx.cache();
    for (int layer : cache.global_layers()) {
      const int64_t base = base_[layer], n = cache.head(layer, 0).size();
      if (n < base + 2 * lag_) continue;
      const int64_t partitions = (n - base) / lag_;
      for (int h = 0; h < cache.n_kv_heads(); ++h) {
        keep_.resize(base);
        std::iota(keep_.begin(), keep_.end(), 0);
        // Tokens kept verbatim (sinks, the compressed region, the tail) are not scored: +inf.
        head_scores_.assign(n, std::numeric_limits<float>::infinity());
        for (int64_t p = 0; p + 1 < partitions; ++p) {
          const int64_t start = base + p * lag_;
          score_partition(cache.head(layer, h), start, cache.head_dim());
          std::copy(scores_.begin(), scores_.end(), head_scores_.begin() + start);
          for (int32_t i : top_k_ascending(scores_, keep_per_partition_)) keep_.push_back(int32_t(start + i));
        }
        for (int64_t i = base + (partitions - 1) * lag_; i < n; ++i) keep_.push_back(int32_t(i));
        ctx.record_scores(layer, h, head_scores_);
        ctx.keep(layer, h, keep_);
      }
      base_[layer] = base + (partitions - 1) * keep_per_partition_;
    }
  }

  // kvpress's one-shot form: within each scored partition the scores become ranks / L (ties: the
  // lower position ranks higher); sinks and the last L + remainder tokens score 1 (above any
  // rank); the global top `budget` is kept. A prompt too short to hold two partitions keeps the
  // sinks, then the most recent tokens (scores rise with position).
  void compress_oneshot(PressContext& ctx) {
    PagedKvCache& cache = ctx.cache();
    for (int layer : cache.global_layers())
      for (int h = 0; h < cache.n_kv_heads(); ++h) {
        const HeadCache& head = cache.head(layer, h);
        const int64_t n = head.size();
        if (n <= ctx.budget()) continue;
        std::vector<float> ranked(n, 1.0f);
        if (n < sink_ + 2 * lag_) {
          for (int64_t i = sink_; i < n; ++i) ranked[i] = float(i - sink_) / float(n - sink_);
        } else {
          const int64_t partitions = (n - sink_) / lag_;
          for (int64_t p = 0; p + 1 < partitions; ++p) {
            const int64_t start = sink_ + p * lag_;
            score_partition(head, start, cache.head_dim());
            rank_in_partition(&ranked[start]);
          }
        }
        ctx.record_scores(layer, h, ranked);
        ctx.keep(layer, h, top_k_ascending(ranked, ctx.budget()));
      }
  }

  // scores_[i] = score(K) + value_weight * score(V) of token start + i, i < L (LagKV Eq. 7-11).
  void score_partition(const HeadCache& head, int64_t start, int d) {
    scores_.assign(lag_, 0.0f);
    lag_relative_score(head, start, d, /*values=*/false, 1.0f);
    lag_relative_score(head, start, d, /*values=*/true, value_weight_);
  }

  // Normalise the partition's rows by the per-channel min/max of the next partition (a channel
  // with max == min normalises to 0), take each token's unbiased std over the d channels, and
  // softmax those over the partition's L tokens; adds weight * softmax to scores_.
  void lag_relative_score(const HeadCache& head, int64_t start, int d, bool values, float weight) {
    row_.resize(d);
    // The stored rows as f32 (decoded from f16/bf16/q8_0 pages), one at a time.
    auto row = [&](int64_t i) { return values ? head.value_f32(i, row_.data()) : head.key_f32(i, row_.data()); };
    lo_.assign(d, std::numeric_limits<float>::infinity());
    hi_.assign(d, -std::numeric_limits<float>::infinity());
    for (int64_t i = start + lag_; i < start + 2 * lag_; ++i) {
      const float* x = row(i);
      for (int c = 0; c < d; ++c) {
        lo_[c] = std::min(lo_[c], x[c]);
        hi_[c] = std::max(hi_[c], x[c]);
      }
    }
    stds_.resize(lag_);
    normalised_.resize(d);
    for (int64_t t = 0; t < lag_; ++t) {
      const float* x = row(start + t);
      double mean = 0;
      for (int c = 0; c < d; ++c) {
        const float range = hi_[c] - lo_[c];
        normalised_[c] = range > 0 ? (x[c] - lo_[c]) / range : 0.0f;
        mean += normalised_[c];
      }
      mean /= d;
      double sq = 0;
      for (int c = 0; c < d; ++c) sq += (normalised_[c] - mean) * (normalised_[c] - mean);
      stds_[t] = d > 1 ? float(std::sqrt(sq / (d - 1))) : 0.0f;
    }
    const float top = *std::max_element(stds_.begin(), stds_.end());
    double sum = 0;
    for (float& s : stds_) {
      s = std::exp(s - top);
      sum += s;
    }
    for (int64_t t = 0; t < lag_; ++t) scores_[t] += weight * float(stds_[t] / sum);
  }

  // out[i] = rank of scores_[i] among the partition's L scores, divided by L (0 = lowest).
  void rank_in_partition(float* out) {
    order_.resize(lag_);
    std::iota(order_.begin(), order_.end(), 0);
    std::sort(order_.begin(), order_.end(),
              [&](int32_t a, int32_t b) { return scores_[a] < scores_[b] || (scores_[a] == scores_[b] && a > b); });
    for (int64_t r = 0; r < lag_; ++r) out[order_[r]] = float(r) / float(lag_);
  }

  int sink_, lag_, keep_per_partition_;
  float value_weight_;
  bool oneshot_, every_block_;
  std::vector<int64_t> base_;  // per layer: end of the sinks and the compressed region
  // Reused by every compression.
  std::vector<int32_t> keep_, order_;
  std::vector<float> scores_, head_scores_, stds_, lo_, hi_, normalised_, row_;
};

}  // namespace

PressInfo lagkv_press() {
  return {"lagkv",
          "query-free: each partition scored by its K/V spread relative to the next one; recursive mode ignores "
          "--budget (rho sets what is kept)",
          {{"sink", "16", "first tokens never compressed"},
           {"lag", "128", "partition size L; the next partition is the reference"},
           {"rho", "0.5", "fraction of each partition kept, in (0, 1]"},
           {"value_weight", "1.0", "weight of the value score (score = score(K) + w * score(V))"},
           {"mode", "recursive", "recursive (compress every L tokens, budget-free) or oneshot (top --budget)"},
           {"every_block", "false", "recursive mode: compress after each prefill block instead of once at its end"}},
          [](const PressOptions& o) {
            const int lag = o.get_int("lag", 2, 1 << 20);
            const double rho = o.get_double("rho", 0.0, 1.0);
            if (!(rho > 0)) fail("lagkv: option rho={} must be in (0, 1]", rho);
            if (std::floor(rho * lag) < 1) fail("lagkv: option rho={} keeps no token of a partition of {}", rho, lag);
            return std::make_unique<LagKvPress>(
                o.get_int("sink", 0, 1 << 20), lag, rho, o.get_double("value_weight", 0.0, 1e6),
                o.get_choice("mode", {"recursive", "oneshot"}) == "oneshot", o.get_bool("every_block"));
          },
          {.block_eviction = BlockEviction::None,
           .budget_rule = BudgetRule::OwnSchedule,
           .adakv_wraps = false,
           .multi_turn = MultiTurnRule::CarryOver}};
}

}  // namespace kvslim
