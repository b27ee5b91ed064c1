// quest: query-aware page selection (Quest §3). The cache of each KV head is cut into pages of
// `page` consecutive tokens holding the per-channel min and max of their keys. At each decode
// step a page is ranked by the upper bound of its logits, Σ_i max(q_i*min_i, q_i*max_i),
// summed over the group's query heads (the GQA adaptation of RocketKV Appendix A), and the
// tokens of the top floor(budget/page) pages are read. The page holding the newest token is
// always one of them. A head whose whole cache fits the budget reads densely. Nothing is evicted.
#include <algorithm>

#include "press/methods.h"
#include "press/page_bounds.h"
#include "press/sparse_attention.h"
#include "util/error.h"

namespace kvslim {

namespace {

class QuestPress final : public SparseAttentionPress {
 public:
  explicit QuestPress(int page) : page_(page) {}

  void check_budget(int64_t budget) const override {
    if (budget < page_) fail("quest: the budget {} cannot hold one page of {} tokens", budget, page_);
  }

  void begin(PressContext& ctx) override {
    check_budget(ctx.budget());
    budget_ = ctx.budget();
    n_pages_ = budget_ / page_;
    const PagedKvCache& cache = ctx.cache();
    bounds_.resize(size_t(cache.n_layers()) * cache.n_kv_heads());
    for (PageBounds& b : bounds_) b.reset(page_, cache.head_dim());
  }

 protected:
  bool select_head(int layer, int kv_head, const float* q_group, const PagedKvCache& cache, std::vector<int32_t>& out,
                   SelectScratch& scratch) override {
    const HeadCache& head = cache.head(layer, kv_head);
    const int64_t n = head.size();
    if (n <= budget_) return false;
    const int d = cache.head_dim(), group = cache.n_heads() / cache.n_kv_heads();
    PageBounds& bounds = bounds_[size_t(layer) * cache.n_kv_heads() + kv_head];
    bounds.sync(head);
    std::vector<float>& page_scores = scratch.page_scores;
    std::vector<float>& head_bounds = scratch.logits;
    page_scores.assign(bounds.n_pages(), 0.0f);
    head_bounds.resize(bounds.n_pages());
    for (int g = 0; g < group; ++g) {
      page_logit_bounds(bounds, q_group + size_t(g) * d, head_bounds.data());
      for (int64_t p = 0; p < bounds.n_pages(); ++p) page_scores[p] += head_bounds[p];
    }
    std::vector<int32_t>& pages = scratch.picked;
    top_k_with_newest(page_scores, n_pages_, scratch.work, pages);
    for (int32_t p : pages) {
      const int64_t begin = int64_t(p) * page_, end = std::min(n, begin + page_);
      for (int64_t i = begin; i < end; ++i) out.push_back(int32_t(i));
    }
    return true;
  }

 private:
  int page_;
  int64_t budget_ = 0, n_pages_ = 0;
  std::vector<PageBounds> bounds_;  // [layer][kv head]
};

}  // namespace

PressInfo quest_press() {
  return {"quest",
          "sparse decode: reads the pages whose min/max key bound on q·k is largest (group sum)",
          {{"page", "16", "tokens per page; floor(budget/page) pages are read per step"}},
          [](const PressOptions& o) { return std::make_unique<QuestPress>(o.get_int("page", 1, 1 << 20)); },
          {.block_eviction = BlockEviction::None,
           .budget_rule = BudgetRule::NoEviction,
           .adakv_wraps = false,
           .multi_turn = MultiTurnRule::KeepAll}};
}

}  // namespace kvslim
