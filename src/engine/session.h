// A generation session: one model, one per-head KV cache, a compression method (press) and its
// hooks; chunked prefill, appended rows, one-token decode.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/compression.h"
#include "engine/sampler.h"
#include "kv/paged_cache.h"
#include "model/forward.h"
#include "model/model.h"
#include "press/press.h"
#include "util/thread_pool.h"

namespace kvslim {

struct EngineOptions {
  int context = 4096;     // most tokens (prompt + generated) one head may hold
  int batch = 512;        // prefill block size
  int page_tokens = 256;  // KV storage granularity: tokens per page of one head
  // Stored types of the KV pages (--cache-type-k / --cache-type-v): f32, f16, bf16 or q8_0.
  // f16 halves the memory of f32 at an error far below the model's own (docs/kv-cache.md).
  DType cache_type_k = DType::F16;
  DType cache_type_v = DType::F16;
  void validate() const;
};

// What a Session is built with besides the model and the thread pool. Call sites name what they
// set: Session s(model, pool, {.engine = e, .capacity = n, .press = p, .budget = b});
struct SessionOptions {
  EngineOptions engine;
  int64_t capacity = 0;        // most tokens one head holds (at most engine.context; 0: engine.context)
  Press* press = nullptr;      // null: no compression; not owned
  int64_t budget = kNoBudget;  // tokens per (layer, KV head) the press keeps (PressContext::budget)
  int n_predict = 0;           // most tokens the first turn's answer may have (the press plans for it)
  uint64_t seed = 0;           // the press's seed (random, LAQ's draft)
};

class Session final : private PressContext {
 public:
  explicit Session(const Model& model, ThreadPool& pool, const SessionOptions& options);

  // Prefills the prompt in blocks of options.batch with the press's hooks; returns the prompt's
  // last logits (valid until the next decode). The first turn of a session (feed_turn).
  const float* prefill(const std::vector<int32_t>& tokens) { return feed_turn(tokens, n_predict_); }
  // Multi-turn: appends a turn's tokens after everything cached (the history: earlier turns and
  // the tokens decoded since) and runs the press as a prefill whose prompt is the whole history:
  // begin (first turn) or begin_turn (later turns), the prefill probe, after_prefill_block, then
  // end_prefill over what each head keeps plus the new tokens (docs/conversations.md has each
  // method's rule). `n_predict` bounds the answer that follows (the press plans for it). Throws
  // kvslim::Error, with the session unchanged, when the turn cannot fit in the context.
  const float* feed_turn(const std::vector<int32_t>& tokens, int n_predict);
  // The same turn, resumable (the server interleaves its slots block by block): begin_prefill
  // does everything feed_turn does before the first forward pass (the fit check, the press's
  // begin/begin_turn) and runs nothing; each prefill_step() then runs one block of --batch tokens
  // (or the method's smaller block) with the press's block hooks, and the last one also runs the
  // end-of-prefill hooks, after which prefilling() is false and last_logits() holds the turn's
  // last logits. feed_turn and extend are these steps run to the end: there is one prefill loop,
  // so a stepwise prefill is bit-identical to a one-shot one. Until prefilling() is false the
  // session accepts nothing but prefill_step() (a session dropped half-way must be discarded).
  void begin_prefill(const std::vector<int32_t>& tokens, int n_predict);
  // Runs the next block; returns how many tokens it ran.
  int prefill_step();
  bool prefilling() const { return pending_.has_value(); }
  // Forgets every token from history position n on: cached tokens at positions >= n are dropped
  // from every head (tokens evicted before n stay evicted) and the press is told (Press::rewind).
  // A template that rewrites history re-prefills from its first differing token this way.
  // Throws kvslim::Error when a sliding-window layer no longer holds what follows the rewind
  // (check can_rewind first and start a new session instead).
  void rewind(int64_t n);
  bool can_rewind(int64_t n) const;
  // Throws kvslim::Error when a turn of `n` tokens cannot fit in some head after a rewind to
  // history position `rewind_to` (n_past(): none), so callers check before changing anything.
  void check_turn_fits(int64_t n, int64_t rewind_to) const;
  // Feeds more prompt tokens after prefill, uncompressed: the query-agnostic protocol's
  // question, appended once the context is compressed. The press sees none of them (no hooks,
  // probes or sparse selection run); its decode hooks run as usual afterwards, and decode
  // continues after them. Returns the last token's logits (valid until the next decode).
  // With `all_logits`, every appended token's logits are stored there too ([n][n_vocab]): the
  // perplexity of a compressed context scores them.
  const float* extend(const std::vector<int32_t>& tokens, std::vector<float>* all_logits = nullptr);
  // Feeds one token at the next position; returns its logits.
  const float* decode(int32_t token);
  // Every later forward pass hands each layer's attention output to `hook` (see Forward).
  void set_attention_output_hook(Forward::AttentionOutputHook hook) {
    forward_.set_attention_output_hook(std::move(hook));
  }

  int64_t n_past() const override { return n_past_; }
  // Every token run through the model, in position order (turns, extensions, decoded tokens).
  const std::vector<int32_t>& history() const { return history_; }
  // The logits of the last token run (prefill, extend or decode).
  const float* last_logits() const { return last_logits_.data(); }
  Press* press() const { return press_; }
  // The press's state that must survive a KV file (Press::save_state / load_state), and the
  // session's own: used by engine/kv_file only.
  struct Snapshot {
    std::vector<int32_t> history, prompt;
    std::vector<float> last_logits;
    int64_t turns = 0;
  };
  Snapshot snapshot() const { return {history_, prompt_, last_logits_, turns_}; }
  // Installs a snapshot into a session whose cache was just filled by kv_file (no turn run yet).
  void restore(Snapshot snapshot);
  PagedKvCache& mutable_kv() { return cache_; }
  void load_press_state(const PressState& state) {
    if (press_) press_->load_state(*this, state);
  }
  const PagedKvCache& kv() const { return cache_; }
  double score_ms() const { return score_ms_; }  // time spent in the press's hooks
  // Keeps the scores the press reports (kvslim inspect --scores): [layer][kv head].
  void record_scores() { recorded_scores_.assign(size_t(cache_.n_layers()) * cache_.n_kv_heads(), {}); }
  const std::vector<float>& recorded_scores(int layer, int kv_head) const {
    return recorded_scores_[size_t(layer) * cache_.n_kv_heads() + kv_head];
  }
  int64_t budget() const override { return budget_; }
  // Per (layer, KV head), in token-equivalents: the press's own report (RocketKV), else for
  // eviction (and no press) the cached tokens, all of which each decode step reads; nullopt for
  // decode-time sparse attention without a report (Quest, SparQ, Exact-TopK).
  std::optional<TokenCost> token_cost() const;

 private:
  // PressContext
  const ModelConfig& config() const override { return model_.config(); }
  PagedKvCache& cache() override { return cache_; }
  const std::vector<int32_t>& prompt() const override { return prompt_; }
  int n_predict() const override { return n_predict_; }
  uint64_t seed() const override { return seed_; }
  void run_appended(const std::vector<int32_t>& tokens, AttentionProbe* probe) override;
  void run_appended_rows(const float* rows, int n, const LoraAdapter* lora, AttentionProbe* probe) override;
  uint64_t model_fingerprint() const override;
  std::vector<int32_t> generate_pseudo(int n, AttentionProbe* probe) override;
  void keep(int layer, int kv_head, std::span<const int32_t> indices) override;
  void record_scores(int layer, int kv_head, std::span<const float> scores) override;

  // Tokens queued to run in blocks at the next positions (begin_prefill, extend); prefill_step
  // runs one block. A turn's blocks run the press's block hooks and end with end_prefill; an
  // extension's run none and end with after_extend. `all_logits` receives every token's logits.
  struct PendingBlocks {
    std::vector<int32_t> tokens;
    size_t done = 0;
    bool turn = false;
    std::vector<float>* all_logits = nullptr;
  };
  // Runs the pending blocks to the end (the one prefill loop).
  void run_pending();
  // After the last pending block: the end hooks, decode observers and decode pages.
  void finish_pending(bool turn);
  void check_not_prefilling(const char* what) const;
  // Installs the press's decode-time probe and sparse selector (none without a press).
  void install_decode_observers();
  // Runs a press hook, adding its time to score_ms.
  void timed(void (Press::*hook)(PressContext&));
  // Runs `work` (which appends rows) with the capacity raised by `extra_tokens`, then drops
  // the appended rows and the probe.
  void with_room_for(int64_t extra_tokens, const std::function<void()>& work);
  // Runs n appended rows in forward blocks (run_block(start, len) runs rows start .. start+len-1
  // at positions n_past + start ..) with `probe` installed, then drops them.
  void run_appended_blocks(int64_t n, AttentionProbe* probe, const std::function<void(int64_t, int)>& run_block);
  std::vector<int64_t> head_sizes() const;
  // Maps, once prefill is done, the pages n_predict more tokens per head can need, so that decode
  // maps nothing (untouched pages cost no resident memory).
  void reserve_decode_pages();
  void truncate_heads(const std::vector<int64_t>& sizes);

  const Model& model_;
  ThreadPool& pool_;
  EngineOptions options_;
  PagedKvCache cache_;
  Forward forward_;
  Press* press_;
  int64_t budget_;
  int n_predict_;
  uint64_t seed_;
  std::vector<int32_t> prompt_;   // the press's prompt: the history as of the last turn's prefill
  std::vector<int32_t> history_;  // every token run, in position order
  int64_t turns_ = 0;             // turns fed so far
  std::vector<float> last_logits_;
  int64_t n_past_ = 0;
  double score_ms_ = 0;
  std::vector<std::vector<float>> recorded_scores_;
  std::optional<PendingBlocks> pending_;
};

// Throws kvslim::Error for an empty prompt, one longer than the context or an id outside the
// vocabulary.
void validate_prompt(const Model& model, const EngineOptions& options, const std::vector<int32_t>& prompt);

}  // namespace kvslim
