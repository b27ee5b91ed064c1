#include "eval/intrinsic.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "eval/intrinsic_math.h"
#include "eval/oracle.h"
#include "util/error.h"

namespace kvslim::eval {

namespace {

using LogitsObserver = std::function<void(int step, const float* logits)>;
using AttentionObserver = std::function<void(int step, int layer, const float* out)>;

// Feeds `n` tokens after the prompt (whose last logits are `logits`): forced[t] when `forced`
// is given, else the argmax of the logits before it (the lowest id wins ties). Observers see
// the logits before token t and each layer's attention output while token t is fed.
std::vector<int32_t> follow(Session& session, const float* logits, int n_vocab, int n,
                            const std::vector<int32_t>* forced, const LogitsObserver& on_logits,
                            const AttentionObserver& on_attention) {
  int step = 0;
  struct HookGuard {  // the hook refers to this frame: never leave it installed
    Session& session;
    ~HookGuard() { session.set_attention_output_hook({}); }
  } guard{session};
  if (on_attention)
    session.set_attention_output_hook([&](int layer, const float* out, int) { on_attention(step, layer, out); });
  std::vector<int32_t> tokens;
  for (; step < n; ++step) {
    if (on_logits) on_logits(step, logits);
    const int32_t token =
        forced ? (*forced)[size_t(step)] : int32_t(std::max_element(logits, logits + n_vocab) - logits);
    tokens.push_back(token);
    logits = session.decode(token);
  }
  return tokens;
}

EngineOptions sized_for(const EngineOptions& engine, const PromptTokens& prompt, size_t n_follow) {
  EngineOptions sized = engine;
  sized.context = int(prompt.size() + int64_t(n_follow));
  return sized;
}

// Accumulates per-step comparisons of a compressed run with the reference.
struct Comparison {
  double attn_error_sum = 0, kl_sum = 0, nll_full = 0, nll_compressed = 0;
  int attn_terms = 0, kl_terms = 0;

  void logits(const FullReference& ref, int n_vocab, int step, const float* logits) {
    const std::vector<double> full = log_softmax(std::span(&ref.logits[size_t(step) * n_vocab], size_t(n_vocab)));
    const std::vector<double> compressed = log_softmax(std::span(logits, size_t(n_vocab)));
    kl_sum += kl_divergence(full, compressed);
    ++kl_terms;
    const int32_t token = ref.forced[size_t(step)];
    nll_full -= full[size_t(token)];
    nll_compressed -= compressed[size_t(token)];
  }

  void attention(const FullReference& ref, int n_layers, int q_dim, int step, int layer, const float* out) {
    const float* full = &ref.attention[(size_t(step) * n_layers + layer) * q_dim];
    attn_error_sum += relative_l2_error(std::span(out, size_t(q_dim)), std::span(full, size_t(q_dim)));
    ++attn_terms;
  }
};

}  // namespace

void IntrinsicOptions::validate(int n_vocab) const {
  if (response_tokens < 1) fail("--response-tokens must be >= 1 (got {})", response_tokens);
  for (int32_t id : continuation)
    if (id < 0 || id >= n_vocab) fail("continuation token id {} is outside the vocabulary [0, {})", id, n_vocab);
}

FullReference run_full_reference(const Model& model, ThreadPool& pool, const EngineOptions& engine,
                                 const PromptTokens& prompt, const IntrinsicOptions& options) {
  const ModelConfig& c = model.config();
  const int n = options.response_tokens;
  const bool kl_on_response = options.kl && options.continuation.empty();
  FullReference ref;
  ref.n_keys = int64_t(prompt.compressed.size());

  ResponseAttention observer(ref.n_keys);
  Session session(model, pool,
                  {.engine = sized_for(engine, prompt, size_t(n)),
                   .capacity = int64_t(prompt.size()) + n,
                   .press = &observer,
                   .n_predict = n});
  const float* logits = feed_prompt(session, prompt);
  LogitsObserver keep_logits = [&](int, const float* l) { ref.logits.insert(ref.logits.end(), l, l + c.n_vocab); };
  AttentionObserver keep_attention;
  if (options.attn_error) {
    ref.attention.resize(size_t(n) * c.n_layers * c.q_dim());
    keep_attention = [&](int step, int layer, const float* out) {
      std::copy(out, out + c.q_dim(), &ref.attention[(size_t(step) * c.n_layers + layer) * c.q_dim()]);
    };
  }
  ref.response = follow(session, logits, c.n_vocab, n, nullptr, kl_on_response ? keep_logits : nullptr, keep_attention);
  ref.response_attention = observer.sums();

  if (kl_on_response) {
    ref.forced = ref.response;
  } else if (options.kl) {
    ref.forced = options.continuation;
    Session forced(model, pool,
                   {.engine = sized_for(engine, prompt, ref.forced.size()),
                    .capacity = int64_t(prompt.size() + ref.forced.size())});
    follow(forced, feed_prompt(forced, prompt), c.n_vocab, int(ref.forced.size()), &ref.forced, keep_logits, nullptr);
  }
  return ref;
}

IntrinsicResult measure_intrinsic(const Model& model, ThreadPool& pool, const EngineOptions& engine,
                                  const PromptTokens& prompt, const FullReference& ref,
                                  const std::function<std::unique_ptr<Press>()>& make_press, int64_t budget,
                                  uint64_t seed, const IntrinsicOptions& options) {
  const ModelConfig& c = model.config();
  const int n = int(ref.response.size());
  const bool kl_on_response = options.kl && options.continuation.empty();
  Comparison cmp;
  const LogitsObserver compare_logits = [&](int step, const float* l) { cmp.logits(ref, c.n_vocab, step, l); };
  const AttentionObserver compare_attention = [&](int step, int layer, const float* out) {
    cmp.attention(ref, c.n_layers, c.q_dim(), step, layer, out);
  };

  IntrinsicResult result;
  if (options.recall || options.attn_error || kl_on_response) {
    const std::unique_ptr<Press> press = make_press();
    Session session(model, pool,
                    {.engine = sized_for(engine, prompt, size_t(n)),
                     .capacity = int64_t(prompt.size()) + n,
                     .press = press.get(),
                     .budget = budget,
                     .n_predict = n,
                     .seed = seed});
    const float* logits = feed_prompt(session, prompt);
    if (options.recall) {
      const int64_t oracle_size = std::min(budget, ref.n_keys);
      result.recall = recall_at_budget(
          session.kv(), oracle_sets(ref.response_attention, c.n_layers, c.n_kv_heads, oracle_size), ref.n_keys);
    }
    if (options.attn_error || kl_on_response)
      follow(session, logits, c.n_vocab, n, &ref.response, kl_on_response ? compare_logits : nullptr,
             options.attn_error ? compare_attention : nullptr);
  }
  if (options.kl && !kl_on_response) {
    const std::unique_ptr<Press> press = make_press();
    const int n_forced = int(ref.forced.size());
    Session session(model, pool,
                    {.engine = sized_for(engine, prompt, ref.forced.size()),
                     .capacity = int64_t(prompt.size()) + n_forced,
                     .press = press.get(),
                     .budget = budget,
                     .n_predict = n_forced,
                     .seed = seed});
    follow(session, feed_prompt(session, prompt), c.n_vocab, n_forced, &ref.forced, compare_logits, nullptr);
  }
  if (options.attn_error) result.attn_error = cmp.attn_error_sum / cmp.attn_terms;
  if (options.kl) {
    result.kl = cmp.kl_sum / cmp.kl_terms;
    result.ppl_ratio = std::exp((cmp.nll_compressed - cmp.nll_full) / cmp.kl_terms);
  }
  return result;
}

}  // namespace kvslim::eval
