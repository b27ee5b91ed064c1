// sparq: SparQ attention (SparQ §3, Algorithm 1). At each decode step each KV head picks the r
// channels of largest Σ_group |q_i|, approximates every query head's attention from those
// channels only, softmax(q[sel]·k[sel] / sqrt(d * Σ_sel|q| / Σ_all|q|)), averages it over the
// group, and reads the k tokens of largest approximate attention exactly (the newest token
// always among them). SparQ's mean-value reallocation is not applied: attention reads only the
// selected tokens. Nothing is evicted.
#include <algorithm>

#include "press/methods.h"
#include "press/sparse_attention.h"
#include "kv/attention.h"

namespace kvslim {

namespace {

class SparqPress final : public SparseAttentionPress {
 public:
  SparqPress(int r, int k) : r_option_(r), k_option_(k) {}

  void begin(PressContext& ctx) override {
    const int d = ctx.config().head_dim;
    r_ = r_option_ > 0 ? std::min(r_option_, d) : std::max(1, d / 4);
    k_ = k_option_ > 0 ? k_option_ : ctx.budget();
  }

 protected:
  bool select_head(int layer, int kv_head, const float* q_group, const PagedKvCache& cache, std::vector<int32_t>& out,
                   SelectScratch& scratch) override {
    const HeadCache& head = cache.head(layer, kv_head);
    const int64_t n = head.size();
    if (n <= k_) return false;
    const int d = cache.head_dim(), group = cache.n_heads() / cache.n_kv_heads();
    const std::vector<int32_t>& channels = scratch.channels;
    top_channels(q_group, group, d, r_, scratch.magnitude, scratch.channels);
    std::vector<float>&scores = scratch.scores, &logits = scratch.logits, &masked = scratch.row;
    scores.assign(n, 0.0f);
    logits.resize(size_t(group) * n);
    // q_g / temperature_g on the selected channels and exact zeros elsewhere: the decode kernel's
    // full-row dot product then sums exactly the r selected products (the zeros add nothing), with
    // each key row read once for the group. Row-major keys put every channel of a row in the same
    // cache lines, so reading r of them would touch the same memory as reading all d; only the
    // order of the float additions differs from a gathered r-term sum.
    masked.assign(size_t(group) * d, 0.0f);
    for (int g = 0; g < group; ++g) {
      const float* q = q_group + size_t(g) * d;
      const float scale = sparq_scale(q, channels, d);
      for (int32_t c : channels) masked[size_t(g) * d + c] = q[c] / scale;
    }
    key_scores(PagedKv{head, d, cache.page_tokens()}, masked.data(), group, 1.0f, logits.data(), n, scratch.attention);
    for (int g = 0; g < group; ++g)
      add_softmax(std::span<float>(logits.data() + size_t(g) * n, size_t(n)), 1.0f / float(group), scores,
                  cache.sink_logit(layer, kv_head * group + g));
    top_k_with_newest(scores, k_, scratch.work, out);
    return true;
  }

 private:
  int r_option_, k_option_;
  int r_ = 0;
  int64_t k_ = 0;
};

}  // namespace

PressInfo sparq_press() {
  return {"sparq",
          "sparse decode: approximate attention on the r strongest query channels picks the k tokens read",
          {{"r", "0", "query channels used for the approximate scores (0: head_dim/4)"},
           {"k", "0", "tokens read per KV head per decode step, newest included (0: the budget)"}},
          [](const PressOptions& o) {
            return std::make_unique<SparqPress>(o.get_int("r", 0, 1 << 16), o.get_int("k", 0, 1 << 30));
          },
          {.block_eviction = BlockEviction::None,
           .budget_rule = BudgetRule::NoEviction,
           .adakv_wraps = false,
           .multi_turn = MultiTurnRule::KeepAll}};
}

}  // namespace kvslim
