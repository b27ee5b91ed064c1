// rocketkv: two-stage compression for decode (RocketKV §3). The budget is token traffic per KV
// head per decode step, split between the stages by rocketkv_plan (press/methods/rocketkv_plan.h).
// - Stage 1, SnapKV++ (§3.3), once the prompt is cached: the last `window` prompt queries'
//   attention on the prefix, summed over the window and the group's query heads (one selection
//   per KV head), max-pooled (kernel 63; `kernel_long` from `long_threshold` prompt tokens on),
//   keeps the window plus the top P - window prefix tokens.
// - Stage 2, hybrid attention (§3.4), at each decode step: pages of p cache indices keep the
//   per-channel min and max of K; the group picks its r channels of largest Σ|q_i| and uses,
//   per channel, max where Σq_i > 0 else min; each query head's page logit is
//   Σ_sel q_i*rep_i / sqrt(d * Σ_sel|q| / Σ_all|q|), inherited by the page's tokens; softmax per
//   head over the tokens, mean over the group; the top k tokens (newest always) are read.
// When the whole sequence fits the budget (prompt + n_predict <= B) nothing is compressed.
// mt=true (RocketKV-MT, docs/methods.md "rocketkv"): stage 1 selects a working set but evicts
// nothing, so the full KV stays for later turns; stage 2 ranks the working set plus every token
// appended after the prompt. A turn is one prefill (one generate call), so stage 1 runs once per
// turn.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "press/attention_accumulator.h"
#include "press/methods.h"
#include "press/page_bounds.h"
#include "press/methods/rocketkv_plan.h"
#include "press/select.h"
#include "press/sparse_attention.h"
#include "tensor/ops.h"
#include "util/error.h"

namespace kvslim {

double RocketKvPlan::storage_tokens(int64_t stored, int64_t paged) const {
  return double(stored) + double((paged + page - 1) / page);
}

double RocketKvPlan::traffic_tokens(int64_t paged, int head_dim) const {
  const int64_t pages = (paged + page - 1) / page;
  return double(pages) * channels / (2.0 * head_dim) + double(std::min(top_k, paged));
}

RocketKvPlan rocketkv_plan(int64_t n_prompt, int64_t max_new, int64_t budget, int head_dim, RocketKvSplit split) {
  const int64_t total = n_prompt + max_new;
  const double c = std::max(1.0, double(total) / double(budget));
  const double alpha = split == RocketKvSplit::Even ? 0.5 : std::min(0.2 + 0.06 * std::log2(c), 0.8);
  const int64_t capacity =
      std::max(int64_t(std::floor(double(total) / std::pow(c, alpha))), std::min(2 * max_new, total));
  const double c2 = std::max(1.0, double(capacity) / double(budget));
  int64_t page = int64_t(std::ceil(std::sqrt(c2)));
  if (double(page) > c2) page = 1;
  RocketKvPlan plan;
  plan.prompt_budget = std::max<int64_t>(1, capacity - max_new);
  plan.page = int(page);
  plan.channels = int(std::clamp<int64_t>(int64_t(std::floor(double(head_dim) * double(page) / c2)), 1, head_dim));
  plan.top_k = std::max<int64_t>(1, budget / 2);
  return plan;
}

namespace {

struct RocketKvSettings {
  int window = 32, kernel = 63, kernel_long = 511;
  int64_t long_threshold = 0;
  RocketKvSplit split = RocketKvSplit::Released;
  int64_t prompt_budget = 0, top_k = 0;  // overrides of the plan; 0: from the split
  int page = 0, channels = 0;
  bool multi_turn = false;
};

class RocketKvPress final : public SparseAttentionPress {
 public:
  explicit RocketKvPress(const RocketKvSettings& s) : s_(s) {}

  AttentionProbe* prefill_probe() override { return active_ ? &votes_ : nullptr; }
  SparseSelector* sparse_selector() override { return active_ ? this : nullptr; }

  void check_budget(int64_t budget) const override {
    if (budget < 2) fail("rocketkv: the budget {} leaves stage 2 no token (k = budget/2)", budget);
  }

  void begin(PressContext& ctx) override {
    const int64_t budget = ctx.budget(), n = ctx.n_prompt();
    active_ = budget != kNoBudget && n + ctx.n_predict() > budget;
    if (!active_) return;
    check_budget(budget);
    const int d = ctx.config().head_dim;
    plan_ = rocketkv_plan(n, ctx.n_predict(), budget, d, s_.split);
    if (s_.prompt_budget > 0) plan_.prompt_budget = s_.prompt_budget;
    if (s_.page > 0) plan_.page = s_.page;
    if (s_.channels > 0) plan_.channels = std::min(s_.channels, d);
    if (s_.top_k > 0) plan_.top_k = s_.top_k;
    votes_.reset(ctx.config(), n, n - s_.window);
  }

  // Stage 1. Pages restart from the compacted cache (or the working set).
  std::optional<TokenCost> token_cost() const override { return active_ ? std::optional(cost_) : std::nullopt; }

  void end_prefill(PressContext& ctx) override {
    if (!active_) return;
    PagedKvCache& cache = ctx.cache();
    const size_t heads = size_t(cache.n_layers()) * cache.n_kv_heads();
    working_set_.assign(heads, {});
    tail_from_.assign(heads, 0);
    bounds_.resize(heads);
    const int kernel = s_.long_threshold > 0 && ctx.n_prompt() >= s_.long_threshold ? s_.kernel_long : s_.kernel;
    for (int layer : cache.global_layers())
      for (int h = 0; h < cache.n_kv_heads(); ++h) {
        const size_t lh = size_t(layer) * cache.n_kv_heads() + h;
        bounds_[lh].reset(plan_.page, cache.head_dim());
        const int64_t n = cache.head(layer, h).size();
        if (n <= plan_.prompt_budget) continue;
        // Group mean: the group sum of §3.3 scaled by 1/group, the same ranking after pooling.
        std::vector<float> votes = votes_.group_mean(layer, h);
        votes.resize(n);
        const int64_t prefix = n - std::min<int64_t>(s_.window, n);
        std::vector<float> scores = pool1d(std::span<const float>(votes).first(prefix), kernel, PoolKind::Max);
        std::vector<int32_t> keep = window_plus_top(scores, n, s_.window, plan_.prompt_budget);
        scores.resize(n, std::numeric_limits<float>::infinity());
        ctx.record_scores(layer, h, scores);
        if (s_.multi_turn) {
          working_set_[lh] = std::move(keep);
          tail_from_[lh] = n;
        } else {
          ctx.keep(layer, h, keep);
        }
      }
    // What the first decode step stores and reads per head (stage 2 pages what it ranks), over
    // the heads of the layers it governs (a sliding-window layer holds its window).
    cost_ = {};
    const double governed = double(cache.global_layers().size()) * cache.n_kv_heads();
    for (int layer : cache.global_layers())
      for (int h = 0; h < cache.n_kv_heads(); ++h) {
        const size_t lh = size_t(layer) * cache.n_kv_heads() + h;
        const int64_t stored = cache.head(layer, h).size();
        const int64_t paged = s_.multi_turn && !working_set_[lh].empty() ? int64_t(working_set_[lh].size()) : stored;
        cost_.storage += plan_.storage_tokens(stored, paged) / governed;
        cost_.traffic += plan_.traffic_tokens(paged, cache.head_dim()) / governed;
      }
  }

 protected:
  // Stage 2 over the view (the whole cache, or RocketKV-MT's working set plus later tokens).
  bool select_head(int layer, int kv_head, const float* q_group, const PagedKvCache& cache, std::vector<int32_t>& out,
                   SelectScratch& scratch) override {
    const size_t lh = size_t(layer) * cache.n_kv_heads() + kv_head;
    const HeadCache& head = cache.head(layer, kv_head);
    const TokenView view{working_set_[lh], tail_from_[lh]};
    const int64_t n = view.size(head);
    if (n <= plan_.top_k) {
      if (view.whole_cache()) return false;
      for (int64_t s = 0; s < n; ++s) out.push_back(int32_t(view.index(s)));
      return true;
    }
    const int d = cache.head_dim(), group = cache.n_heads() / cache.n_kv_heads();
    PageBounds& bounds = bounds_[lh];
    bounds.sync(head, view);
    const std::vector<int32_t>& channels = scratch.channels;
    top_channels(q_group, group, d, plan_.channels, scratch.magnitude, scratch.channels);
    // Every token of a page has the page's logit, so the softmax over tokens is computed per
    // page (a page of c tokens adds c terms to the normaliser): O(pages) work, not O(tokens).
    const int64_t n_pages = bounds.n_pages();
    std::vector<float>&page_probs = scratch.page_scores, &logits = scratch.logits;
    page_probs.assign(n_pages, 0.0f);
    logits.assign(size_t(group) * n_pages, 0.0f);
    // Per selected channel, the one page bound it reads (max where the group's Σq_i > 0, else
    // min), streamed once over all pages for the whole group.
    for (const int32_t c : channels) {
      float sum = 0.0f;
      for (int g = 0; g < group; ++g) sum += q_group[size_t(g) * d + c];
      const float* bound = sum > 0.0f ? bounds.max_channel(c) : bounds.min_channel(c);
      for (int g = 0; g < group; ++g) {
        const float qc = q_group[size_t(g) * d + c];
        float* lg = logits.data() + size_t(g) * n_pages;
        for (int64_t p = 0; p < n_pages; ++p) lg[p] += qc * bound[p];
      }
    }
    // The token softmax per head: a softmax over pages (vectorised), then renormalised for the
    // page sizes. Every page holds plan_.page tokens but the last, so Σ_tokens = page * Σ_pages
    // less the last page's missing tokens.
    const double missing = double(plan_.page - page_size(n_pages - 1, n));
    for (int g = 0; g < group; ++g) {
      const float inv_scale = 1.0f / sparq_scale(q_group + size_t(g) * d, channels, d);
      float* lg = logits.data() + size_t(g) * n_pages;
      for (int64_t p = 0; p < n_pages; ++p) lg[p] *= inv_scale;
      // With an attention sink (gpt-oss) the page softmax leaves the sink's share 1 - total out
      // of the pages; it joins the token normaliser once, as in the kernels' softmax.
      softmax_inplace(lg, n_pages, cache.sink_logit(layer, kv_head * group + g));
      double total = 0.0;
      for (int64_t p = 0; p < n_pages; ++p) total += lg[p];
      const double norm = double(plan_.page) * total - missing * double(lg[n_pages - 1]) + (1.0 - total);
      const float weight = float(1.0 / (double(group) * norm));
      for (int64_t p = 0; p < n_pages; ++p) page_probs[p] += weight * lg[p];
    }
    top_k_slots(page_probs, n, scratch.order, scratch.taken, scratch.picked);
    for (int32_t s : scratch.picked) out.push_back(int32_t(view.index(s)));
    return true;
  }

 private:
  // Tokens of page p among the view's n slots (the last page may be partial).
  int64_t page_size(int64_t p, int64_t n) const { return std::min<int64_t>(plan_.page, n - p * plan_.page); }

  // The top_k slots by their page's probability (ties: lower slot), the newest slot always one
  // of them; ascending. Whole pages are taken best first, the last one from its lowest slots.
  void top_k_slots(const std::vector<float>& page_probs, int64_t n, std::vector<uint64_t>& order,
                   std::vector<int32_t>& taken, std::vector<int32_t>& slots) const {
    // Best first = probability descending, then page ascending: one 64-bit key per page,
    // ascending (probabilities are non-negative floats, whose bit patterns order as their values
    // do), so that selecting and sorting compare integers instead of chasing indices.
    order.resize(page_probs.size());
    for (size_t p = 0; p < page_probs.size(); ++p) {
      uint32_t bits;
      std::memcpy(&bits, &page_probs[p], 4);
      order[p] = uint64_t(~bits) << 32 | uint32_t(p);
    }
    // Only the best pages are read in order: top_k - 1 slots fill at most ceil((top_k-1)/page)
    // pages, plus one when a page holds the newest slot (skipped). The keys are distinct, so
    // this prefix is the one a full sort gives.
    const size_t needed = std::min(order.size(), size_t((std::min(plan_.top_k, n) + plan_.page - 2) / plan_.page + 1));
    std::nth_element(order.begin(), order.begin() + needed - 1, order.end());
    std::sort(order.begin(), order.begin() + needed);
    order.resize(needed);
    // How many of its lowest slots each page gives (the newest slot aside), best pages first;
    // then the slots in ascending order without a sort: page by page, the newest (the last
    // slot of all) at the end.
    const int64_t n_pages = int64_t(page_probs.size());
    taken.assign(size_t(n_pages), 0);
    int64_t wanted = std::min(plan_.top_k, n) - 1;
    for (size_t i = 0; i < order.size() && wanted > 0; ++i) {
      const int64_t page = int64_t(order[i] & 0xffffffffu);
      const int64_t usable = page_size(page, n) - (page == n_pages - 1 ? 1 : 0);
      taken[size_t(page)] = int32_t(std::min(usable, wanted));
      wanted -= taken[size_t(page)];
    }
    slots.clear();
    for (int64_t page = 0; page < n_pages; ++page)
      for (int32_t j = 0; j < taken[size_t(page)]; ++j) slots.push_back(int32_t(page * plan_.page + j));
    slots.push_back(int32_t(n - 1));
  }

  RocketKvSettings s_;
  bool active_ = false;
  RocketKvPlan plan_;
  TokenCost cost_;
  AttentionAccumulator votes_;
  std::vector<std::vector<int32_t>> working_set_;  // [layer][kv head]: RocketKV-MT's stage-1 selection
  std::vector<int64_t> tail_from_;                 // [layer][kv head]: first cache index after it
  std::vector<PageBounds> bounds_;                 // [layer][kv head]
};

int odd_kernel(const PressOptions& o, const std::string& key) {
  const int kernel = o.get_int(key, 1, 1 << 16);
  if (kernel % 2 == 0) fail("rocketkv: option {}={} must be odd", key, kernel);
  return kernel;
}

}  // namespace

PressInfo rocketkv_press() {
  return {
      "rocketkv",
      "SnapKV++ eviction at prefill, then hybrid page/channel sparse attention; budget = traffic per step",
      {{"window", "32", "stage 1 observation window: last prompt queries"},
       {"kernel", "63", "stage 1 max-pooling kernel (odd)"},
       {"kernel_long", "511", "pooling kernel from long_threshold prompt tokens on (odd)"},
       {"long_threshold", "0", "prompt length switching to kernel_long (0: never; the paper: 48K on Llama 3.1)"},
       {"split", "released", "budget split: released (adaptive α) or even (the paper's √c per stage)"},
       {"prompt_budget", "0", "override P, prompt tokens stage 1 keeps (0: from the split)"},
       {"page", "0", "override p, tokens per page (0: from the split)"},
       {"channels", "0", "override r, query channels (0: from the split)"},
       {"top_k", "0", "override k, tokens read per step (0: budget/2)"},
       {"mt", "false", "RocketKV-MT: stage 1 selects a working set and keeps the full KV"}},
      [](const PressOptions& o) {
        RocketKvSettings s;
        s.window = o.get_int("window", 1, 1 << 20);
        s.kernel = odd_kernel(o, "kernel");
        s.kernel_long = odd_kernel(o, "kernel_long");
        s.long_threshold = o.get_int("long_threshold", 0, 1 << 30);
        s.split = o.get_choice("split", {"released", "even"}) == "even" ? RocketKvSplit::Even : RocketKvSplit::Released;
        s.prompt_budget = o.get_int("prompt_budget", 0, 1 << 30);
        s.page = o.get_int("page", 0, 1 << 20);
        s.channels = o.get_int("channels", 0, 1 << 16);
        s.top_k = o.get_int("top_k", 0, 1 << 30);
        s.multi_turn = o.get_bool("mt");
        return std::make_unique<RocketKvPress>(s);
      },
      {.block_eviction = BlockEviction::None,
       .budget_rule = BudgetRule::OwnSchedule,
       .adakv_wraps = false,
       .multi_turn = MultiTurnRule::SelectAgain}};
}

}  // namespace kvslim
