// laq: Lookahead Q-Cache (Wang et al., 2025; a baseline of the LookaheadKV paper, §2 "Draft-based
// Approaches" and Appendix B). SnapKV picks a draft cache; the model greedily generates a
// `lookahead`-token pseudo response over that draft cache; the pseudo response's queries (the
// "Q-cache") then vote on the FULL prompt KV as SnapKV's window queries would, and the top
// `budget` prompt tokens are kept. No prompt window is forced: the observation window is the
// pseudo response, whose KV is dropped (forcing the last prompt tokens as well is LAQ++, not
// this method).
//
// The draft cache is a view, not a copy: during the pseudo generation a sparse selector makes
// each head attend only to its SnapKV tokens plus the pseudo tokens so far, which is the
// evicted cache's attention, while the full prompt KV stays in place for the rescoring (LAQ
// needs it; its memory peak is the full prompt KV, as for any prefill). The same selector sees
// each pseudo query and scores it against everything a full cache would show it: the prompt and
// the pseudo tokens before it (softmax(q.k/sqrt(d)) over those keys).
// Cost: a `lookahead`-token greedy generation (one-token forwards) plus, per pseudo query,
// one dense attention row over the full cache in every layer.
#include <algorithm>
#include <cmath>

#include "press/attention_accumulator.h"
#include "press/methods.h"
#include "press/select.h"
#include "press/methods/snapkv.h"
#include "tensor/ops.h"

namespace kvslim {

namespace {

class LaqPress final : public Press, private SparseSelector {
 public:
  LaqPress(const SnapKvSettings& settings, int lookahead)
      : settings_(settings), draft_scorer_("laq", settings), lookahead_(lookahead) {}

  AttentionProbe* prefill_probe() override { return draft_scorer_.prefill_probe(); }
  void check_budget(int64_t budget) const override { draft_scorer_.check_budget(budget); }
  void begin(PressContext& ctx) override { draft_scorer_.begin(ctx); }

  void end_prefill(PressContext& ctx) override {
    PagedKvCache& cache = ctx.cache();
    const int64_t budget = ctx.budget();
    bool over_budget = false;
    for (int layer : cache.global_layers()) over_budget |= cache.n_tokens(layer) > budget;
    if (!over_budget) return;  // budget >= prompt: no pseudo response
    n_prompt_ = ctx.n_prompt();
    group_ = ctx.config().group_size();

    // Stage 1: SnapKV's selection per head (window plus top pooled votes), the draft cache.
    draft_.assign(size_t(cache.n_layers()) * cache.n_kv_heads(), {});
    // The pseudo response's tokens follow each head's cache (in later turns of a session a head
    // holds fewer tokens than the history).
    pseudo_from_.assign(draft_.size(), 0);
    for (int layer : cache.global_layers())
      for (int h = 0; h < cache.n_kv_heads(); ++h)
        pseudo_from_[size_t(layer) * cache.n_kv_heads() + h] = cache.head(layer, h).size();
    for (int layer : cache.global_layers())
      for (int h = 0; h < cache.n_kv_heads(); ++h)
        draft_[size_t(layer) * cache.n_kv_heads() + h] =
            draft_scorer_.select(ctx, layer, h, draft_scorer_.score(ctx, layer, h), budget);

    // Stage 2: the pseudo response over the draft cache; select() records its queries' votes.
    lookahead_votes_.reset(ctx.config(), n_prompt_, ctx.n_past());
    struct SelectorGuard {
      PagedKvCache& cache;
      ~SelectorGuard() { cache.set_sparse_selector(nullptr); }
    } guard{cache};
    cache.set_sparse_selector(this);
    ctx.generate_pseudo(lookahead_, nullptr);

    // Stage 3: evict the full prompt KV by the pseudo queries' pooled votes.
    for (int layer : cache.global_layers())
      for (int h = 0; h < cache.n_kv_heads(); ++h) {
        if (cache.head(layer, h).size() <= budget) continue;
        // Votes cover the history's length; a later turn's head holds fewer tokens.
        std::vector<float> votes = lookahead_votes_.group_mean(layer, h);
        votes.resize(cache.head(layer, h).size());
        const std::vector<float> scores = pool1d(votes, settings_.kernel, settings_.pooling);
        ctx.record_scores(layer, h, scores);
        ctx.keep(layer, h, top_k_ascending(scores, budget));
      }
  }

 private:
  // One pseudo token's step in `layer`: each head attends to its draft tokens plus the pseudo
  // tokens (cache indices from n_prompt on, the newest included); each query head's exact
  // attention over the whole cache is handed to the lookahead votes. KV heads in parallel.
  bool select(int layer, const float* q, const PagedKvCache& cache, std::vector<std::vector<int32_t>>& selected,
              ThreadPool& pool) override {
    selected.resize(cache.n_kv_heads());
    probs_.resize(cache.n_kv_heads());
    pool.parallel_for_fn(cache.n_kv_heads(), [&](int64_t begin, int64_t end) {
      for (int64_t h = begin; h < end; ++h) select_and_vote(layer, int(h), q, cache, selected[h], probs_[h]);
    });
    return true;
  }

  void select_and_vote(int layer, int h, const float* q, const PagedKvCache& cache, std::vector<int32_t>& sel,
                       std::vector<float>& probs) {
    const int d = cache.head_dim();
    const float scale = 1.0f / std::sqrt(float(d));
    const HeadCache& head = cache.head(layer, h);
    const int64_t n = head.size();
    sel = draft_[size_t(layer) * cache.n_kv_heads() + h];
    for (int64_t i = pseudo_from_[size_t(layer) * cache.n_kv_heads() + h]; i < n; ++i) sel.push_back(int32_t(i));
    probs.resize(n);
    auto key_row = std::vector<float>(size_t(d));  // a decoded key (f16/bf16/q8_0 pages); heads run in parallel
    for (int g = 0; g < group_; ++g) {
      const int q_head = h * group_ + g;
      const float* qh = q + size_t(q_head) * d;
      // The sink logit (gpt-oss; -inf without) joins the softmax as in the attention kernels.
      const float sink = cache.sink_logit(layer, q_head);
      float top = sink;
      for (int64_t j = 0; j < n; ++j) {
        probs[j] = dot(qh, head.key_f32(j, key_row.data()), d) * scale;
        top = std::max(top, probs[j]);
      }
      double sum = sink > -INFINITY ? std::exp(double(sink) - top) : 0.0;
      for (float& p : probs) {
        p = std::exp(p - top);
        sum += p;
      }
      for (float& p : probs) p = float(p / sum);
      lookahead_votes_.on_row(layer, q_head, head.position(n - 1), probs.data(), n);
    }
  }

  SnapKvSettings settings_;
  SnapKvScorer draft_scorer_;  // stage 1
  int lookahead_;
  int64_t n_prompt_ = 0;
  int group_ = 1;
  AttentionAccumulator lookahead_votes_;     // the pseudo response's queries (stage 3)
  std::vector<std::vector<int32_t>> draft_;  // [layer][kv head] SnapKV's kept indices
  std::vector<int64_t> pseudo_from_;         // [layer][kv head] cache index of the first pseudo token
  std::vector<std::vector<float>> probs_;    // [kv head] one attention row, reused
};

// SnapKV's window, kernel and pooling (the draft selection; kernel and pooling also pool the
// lookahead votes) plus the pseudo response's length.
std::vector<OptionSpec> laq_option_specs() {
  std::vector<OptionSpec> specs = snapkv_option_specs();
  specs.push_back({"lookahead", "32", "pseudo response length (greedy tokens)"});
  return specs;
}

}  // namespace

PressInfo laq_press() {
  return {"laq",
          "SnapKV draft cache generates a pseudo response whose queries rescore the full prompt (costs a greedy "
          "generation of `lookahead` tokens)",
          laq_option_specs(),
          [](const PressOptions& o) {
            return std::make_unique<LaqPress>(snapkv_settings(o), o.get_int("lookahead", 1, 1 << 16));
          },
          {.block_eviction = BlockEviction::None,
           .budget_rule = BudgetRule::PerHead,
           .adakv_wraps = false,
           .multi_turn = MultiTurnRule::SelectAgain}};
}

}  // namespace kvslim
