// exact_topk: the oracle of decode-time sparse attention (RocketKV §3.1, Appendix A): at each
// decode step each KV head reads only the k tokens with the largest exact attention
// probability, softmax(q·k/sqrt(d)) averaged over the group's query heads. The newest token is
// always one of the k. Nothing is evicted.
#include <cmath>

#include "press/methods.h"
#include "press/sparse_attention.h"
#include "tensor/ops.h"

namespace kvslim {

namespace {

class ExactTopKPress final : public SparseAttentionPress {
 public:
  explicit ExactTopKPress(int k) : k_option_(k) {}

  void begin(PressContext& ctx) override { k_ = k_option_ > 0 ? k_option_ : ctx.budget(); }

 protected:
  bool select_head(int layer, int kv_head, const float* q_group, const PagedKvCache& cache, std::vector<int32_t>& out,
                   SelectScratch& scratch) override {
    const HeadCache& head = cache.head(layer, kv_head);
    const int64_t n = head.size();
    if (n <= k_) return false;
    const int d = cache.head_dim(), group = cache.n_heads() / cache.n_kv_heads();
    std::vector<float>&scores = scratch.scores, &logits = scratch.logits;
    scores.assign(n, 0.0f);
    logits.resize(size_t(group) * n);
    // The decode kernel's own score pass: every key read once for the whole group (rather than
    // once per query head and decoded one row at a time), which is what made the oracle cost
    // more than the dense attention it replaces.
    attention_scores(PagedKv{head, d, cache.page_tokens()}, q_group, group, logits.data(), n, scratch.attention);
    for (int g = 0; g < group; ++g)
      add_softmax(std::span<float>(logits.data() + size_t(g) * n, size_t(n)), 1.0f / float(group), scores,
                  cache.sink_logit(layer, kv_head * group + g));
    top_k_with_newest(scores, k_, scratch.work, out);
    return true;
  }

 private:
  int k_option_;
  int64_t k_ = 0;
};

}  // namespace

PressInfo exact_topk_press() {
  return {"exact_topk",
          "oracle sparse decode: each step reads the k tokens of largest exact attention (group mean)",
          {{"k", "0", "tokens read per KV head per decode step, newest included (0: the budget)"}},
          [](const PressOptions& o) { return std::make_unique<ExactTopKPress>(o.get_int("k", 0, 1 << 30)); },
          {.block_eviction = BlockEviction::None,
           .budget_rule = BudgetRule::NoEviction,
           .adakv_wraps = false,
           .multi_turn = MultiTurnRule::KeepAll}};
}

}  // namespace kvslim
