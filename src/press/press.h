// The press layer: a KV-cache compression method observes what the engine hands it (attention
// rows, keys and values, block boundaries, decode steps) and selects tokens; the engine evicts.
// One method per file; every method is built from a PressInfo in the registry.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kv/paged_cache.h"
#include "model/config.h"

namespace kvslim {

class LoraAdapter;

// PressContext::budget() of a request that sets no budget: every prompt token may be kept.
// Files and reports write it as 0 ("none").
inline constexpr int64_t kNoBudget = INT64_MAX;

// What a method may see of, and ask from, the running session.
class PressContext {
 public:
  virtual ~PressContext() = default;

  virtual const ModelConfig& config() const = 0;
  virtual PagedKvCache& cache() = 0;
  // Prompt tokens kept per (layer, KV head), sinks and windows included (docs/methods.md, "Rules
  // every method shares": what the budget counts).
  virtual int64_t budget() const = 0;
  virtual const std::vector<int32_t>& prompt() const = 0;
  int64_t n_prompt() const { return int64_t(prompt().size()); }
  // Tokens processed so far (prompt, then generated ones); the next token's position.
  virtual int64_t n_past() const = 0;
  // Most new tokens the request may generate (`-n`).
  virtual int n_predict() const = 0;
  virtual uint64_t seed() const = 0;

  // Runs `tokens` as a continuation at positions n_past() .. n_past()+len-1 (causal among
  // themselves, attending to everything cached); `probe` sees their attention rows. Their KV
  // is removed afterwards; n_past() and the prompt's last logits are unchanged.
  virtual void run_appended(const std::vector<int32_t>& tokens, AttentionProbe* probe) = 0;
  // The same for `n` rows given as embeddings (rows is [n][dim]), with `lora` (may be null)
  // active on these rows only (LookaheadKV's learned rows).
  virtual void run_appended_rows(const float* rows, int n, const LoraAdapter* lora, AttentionProbe* probe) = 0;
  // The model's fingerprint (model/fingerprint.h), which files made for one model check.
  virtual uint64_t model_fingerprint() const = 0;

  // Greedily generates `n` tokens from the current cache and returns their ids; their KV is
  // removed afterwards (LAQ's pseudo response). `probe` sees the generated tokens' attention.
  virtual std::vector<int32_t> generate_pseudo(int n, AttentionProbe* probe) = 0;

  // Eviction, done by the engine: keeps only the tokens at `indices` (strictly ascending cache
  // indices) of one (layer, KV head).
  virtual void keep(int layer, int kv_head, std::span<const int32_t> indices) = 0;

  // Methods report the scores they selected by (one per cached token, before eviction) so
  // that `kvslim inspect --scores` can show them; ignored unless recording.
  virtual void record_scores(int layer, int kv_head, std::span<const float> scores) {}
};

// True when some layer holds more tokens than the budget: a method that pays for an extra forward
// pass to score (DapQ, LookaheadKV) skips it otherwise.
inline bool cache_exceeds_budget(PressContext& ctx) {
  for (int layer : ctx.cache().global_layers())
    if (ctx.cache().n_tokens(layer) > ctx.budget()) return true;
  return false;
}

// What a method must carry from one turn to the next beyond the cache itself (H2O's received
// attention, LagKV's compressed regions), as named arrays, so that a KV file can hold it.
struct PressState {
  std::map<std::string, std::vector<float>> f32;
  std::map<std::string, std::vector<int64_t>> i64;
};

// What one (layer, KV head) holds and reads at each decode step, in token-equivalents (one token
// is its key and value, 2 * head_dim floats), averaged over the heads (docs/methods.md "rocketkv":
// RocketKV reports its storage and traffic so that its budget, a traffic budget, can be checked).
struct TokenCost {
  double storage = 0, traffic = 0;
};

// A method's hooks. A press that runs another one (adakv, a test's recorder) derives from
// ForwardingPress (press/forwarding_press.h); a hook added here is forwarded there too.
class Press {
 public:
  virtual ~Press() = default;

  // Probes the engine installs while the prompt's forward passes run / at each decode step.
  virtual AttentionProbe* prefill_probe() { return nullptr; }
  virtual AttentionProbe* decode_probe() { return nullptr; }
  // Decode-time sparse attention (RocketKV stage 2, Quest, SparQ, Exact-TopK).
  virtual SparseSelector* sparse_selector() { return nullptr; }

  // The largest prefill block the method works with (KeyDiff's block prefill); 0: --batch.
  virtual int prefill_block() const { return 0; }
  // True when the method cuts every head back to the budget after each prefill block (KeyDiff;
  // prefill=block), so that a turn needs room for budget + one block per head, not the whole turn.
  virtual bool evicts_each_prefill_block() const { return prefill_block() > 0; }

  // Throws kvslim::Error when an explicit --budget cannot work with the options (a window
  // larger than the budget), before any work is done.
  virtual void check_budget(int64_t budget) const {}

  // Before the first prefill block (size accumulators here).
  virtual void begin(PressContext& ctx) {}
  // Before each prefill block's forward pass: the block's `n_tokens` prompt tokens will sit at
  // positions n_past() .. n_past()+n_tokens-1 (block-wise eviction prepares its probes here).
  virtual void before_prefill_block(PressContext& ctx, int64_t n_tokens) {}
  // After each prefill block's forward pass over every layer.
  virtual void after_prefill_block(PressContext& ctx) {}
  // Once the whole prompt is cached; the prompt's last logits are already computed.
  virtual void end_prefill(PressContext& ctx) {}
  // After Session::extend cached uncompressed tokens (the query-agnostic protocol's question):
  // decode-time state sized from the cache must grow to cover them.
  virtual void after_extend(PressContext& ctx) {}
  // After each decode step's forward pass (the new token is cached).
  virtual void after_decode_step(PressContext& ctx) {}

  // Multi-turn sessions (docs/conversations.md). Before the forward passes of a later turn's
  // tokens: ctx.prompt() is the whole history, new tokens included; the cache holds what earlier
  // turns kept. The default starts afresh as for a first prompt, which is each prefill-time
  // method's rule (select again over what is kept plus the new tokens); a method whose state
  // must carry over (H2O's accumulators, LagKV's compressed regions) overrides it.
  virtual void begin_turn(PressContext& ctx) { begin(ctx); }
  // The session dropped every cached token at positions >= ctx.n_past() (a rewritten history):
  // state indexed by cache index must follow.
  virtual void rewind(PressContext& ctx) {}
  // The state begin_turn carries over, for KV files; load_state throws kvslim::Error when the
  // state does not fit the restored cache (checked before anything changes).
  virtual void save_state(PressState& state) const {}
  virtual void load_state(PressContext& ctx, const PressState& state) {}
  // Storage and traffic as of the end of prefill, for a method whose budget is not simply the
  // tokens it keeps (RocketKV); nullopt: see Session::token_cost.
  virtual std::optional<TokenCost> token_cost() const { return std::nullopt; }
};

}  // namespace kvslim
