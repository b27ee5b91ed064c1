// keydiff: evicts the keys most similar to the cache's anchor (KeyDiff §3.2): score of key i
// among the cached candidates = -cos(k_i, μ), μ = mean of the L2-normalised candidate keys,
// which ranks like the pairwise form -Σ_j cos(k_i, k_j) (§3.3). No attention is needed, so it
// works with block prompt processing (§2.4): after each prefill block every head is scored over
// its cache plus the block and cut back to the budget; decode is the same with blocks of 1.
// The engine prefills in blocks of min(--batch, block) tokens, so a head never holds more than
// budget + block tokens.
#include <algorithm>
#include <cmath>
#include <limits>

#include "press/methods.h"
#include "press/scorer_press.h"
#include "press/select.h"

namespace kvslim {

namespace {

enum class Anchor { Mean, Median };
enum class Metric { Cosine, Dot };

class KeyDiffPress final : public ScorerPress {
 public:
  KeyDiffPress(int block, bool decode, double recent, Anchor anchor, Metric metric)
      : block_(block), decode_(decode), recent_(recent), anchor_(anchor), metric_(metric) {}

  int prefill_block() const override { return block_; }

  void after_prefill_block(PressContext& ctx) override {
    compress(ctx);  // every head above the budget: score, record, keep the top
  }

  void after_decode_step(PressContext& ctx) override {
    if (!decode_) return;
    evict_lowest_until_within_budget(ctx, [&](int layer, int h) { evict_lowest(ctx, layer, h); });
  }

  std::vector<float> score(PressContext& ctx, int layer, int kv_head) override {
    std::vector<float> scores;
    score_into(ctx, layer, kv_head, scores);
    return scores;
  }

 private:
  // Scores every cached token of the head into `out`; the newest floor(recent * budget) score
  // +inf (always kept) but still count towards the anchor. Member buffers only.
  void score_into(PressContext& ctx, int layer, int kv_head, std::vector<float>& out) {
    const HeadCache& head = ctx.cache().head(layer, kv_head);
    const int d = ctx.cache().head_dim();
    const int64_t n = head.size();
    unit_.resize(size_t(n) * d);
    key_row_.resize(d);
    for (int64_t i = 0; i < n; ++i) {
      const float* k = head.key_f32(i, key_row_.data());
      const double norm = std::sqrt(dot(k, k, d));
      const float inv = norm > 0 ? float(1.0 / norm) : 0.0f;
      for (int c = 0; c < d; ++c) unit_[i * d + c] = k[c] * inv;
    }
    anchor_vector(n, d);
    const double anchor_norm = std::sqrt(dot(anchor_vec_.data(), anchor_vec_.data(), d));
    out.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      if (metric_ == Metric::Dot) {
        out[i] = -float(dot(head.key_f32(i, key_row_.data()), anchor_vec_.data(), d));
      } else {
        const double similarity = anchor_norm > 0 ? dot(&unit_[i * d], anchor_vec_.data(), d) / anchor_norm : 0.0;
        out[i] = -float(similarity);
      }
    }
    const double forced = std::floor(recent_ * double(ctx.budget()));
    for (int64_t i = forced >= double(n) ? 0 : n - int64_t(forced); i < n; ++i)
      out[i] = std::numeric_limits<float>::infinity();
  }

  // μ: element-wise mean or median (the mean of the two middle values for an even count) of
  // the n normalised keys in unit_.
  void anchor_vector(int64_t n, int d) {
    anchor_vec_.assign(d, 0.0f);
    if (n == 0) return;
    for (int c = 0; c < d; ++c) {
      if (anchor_ == Anchor::Mean) {
        double sum = 0;
        for (int64_t i = 0; i < n; ++i) sum += unit_[i * d + c];
        anchor_vec_[c] = float(sum / double(n));
        continue;
      }
      column_.resize(n);
      for (int64_t i = 0; i < n; ++i) column_[i] = unit_[i * d + c];
      const auto mid = column_.begin() + n / 2;
      std::nth_element(column_.begin(), mid, column_.end());
      anchor_vec_[c] = n % 2 ? *mid : float((double(*std::max_element(column_.begin(), mid)) + *mid) / 2.0);
    }
  }

  static double dot(const float* a, const float* b, int d) {
    double s = 0;
    for (int c = 0; c < d; ++c) s += double(a[c]) * b[c];
    return s;
  }

  // Decode: drops the lowest-scored token (ties: the higher position goes, as top-k keeps the
  // lower one).
  void evict_lowest(PressContext& ctx, int layer, int kv_head) {
    score_into(ctx, layer, kv_head, scores_);
    all_but_lowest(scores_, int64_t(scores_.size()), keep_);
    keep(ctx, layer, kv_head, keep_);
  }

  int block_;
  bool decode_;
  double recent_;
  Anchor anchor_;
  Metric metric_;
  // Reused every step: normalised keys [n][d], anchor, one channel (median), scores, kept indices.
  std::vector<float> unit_, anchor_vec_, column_, scores_, key_row_;
  std::vector<int32_t> keep_;
};

}  // namespace

PressInfo keydiff_press() {
  return {"keydiff",
          "evicts the keys most similar to the anchor of the cached keys; block prefill with bounded memory",
          {{"block", "128", "prefill block: tokens between evictions (the engine uses min(--batch, block))"},
           {"decode", "true", "evict in decode too (blocks of 1 token)"},
           {"recent", "0", "fraction of the budget forced to the newest tokens (paper: 0, 0.1, 0.2)"},
           {"anchor", "mean", "mean or median of the normalised keys"},
           {"metric", "cosine", "cosine, or dot: the raw key times the anchor"}},
          [](const PressOptions& o) {
            return std::make_unique<KeyDiffPress>(
                o.get_int("block", 1, 1 << 30), o.get_bool("decode"), o.get_double("recent", 0.0, 1.0),
                o.get_choice("anchor", {"mean", "median"}) == "mean" ? Anchor::Mean : Anchor::Median,
                o.get_choice("metric", {"cosine", "dot"}) == "cosine" ? Metric::Cosine : Metric::Dot);
          },
          {.block_eviction = BlockEviction::Always,
           .budget_rule = BudgetRule::PerHead,
           .adakv_wraps = true,
           .multi_turn = MultiTurnRule::Continue}};
}

}  // namespace kvslim
