#include "engine/session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "model/fingerprint.h"
#include "util/error.h"
#include "util/op_profile.h"

namespace kvslim {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

int32_t argmax(const float* logits, int n) { return int32_t(std::max_element(logits, logits + n) - logits); }

// --batch, lowered to the method's own block size if it has one.
int prefill_block(const EngineOptions& options, const Press* press, int64_t capacity) {
  int64_t block = std::min<int64_t>(options.batch, capacity);
  if (press && press->prefill_block() > 0) block = std::min<int64_t>(block, press->prefill_block());
  return int(std::max<int64_t>(1, block));
}

int64_t head_capacity(const SessionOptions& options) {
  return options.capacity == 0 ? options.engine.context : options.capacity;
}

const EngineOptions& validated(const EngineOptions& options) {
  options.validate();
  return options;
}

}  // namespace

void EngineOptions::validate() const {
  if (context < 1) fail("--ctx must be >= 1 (got {})", context);
  if (batch < 1) fail("--batch must be >= 1 (got {})", batch);
  if (page_tokens < 1 || page_tokens > 65536) fail("--kv-page must be in [1, 65536] (got {})", page_tokens);
  if (!is_kv_type(cache_type_k))
    fail("--cache-type-k {} is not a KV cache type (valid: f32, f16, bf16, q8_0)", dtype_name(cache_type_k));
  if (!is_kv_type(cache_type_v))
    fail("--cache-type-v {} is not a KV cache type (valid: f32, f16, bf16, q8_0)", dtype_name(cache_type_v));
}

Session::Session(const Model& model, ThreadPool& pool, const SessionOptions& options)
    : model_(model),
      pool_(pool),
      options_(validated(options.engine)),
      cache_(kv_shape(model, options_.cache_type_k, options_.cache_type_v),
             std::min<int64_t>(head_capacity(options), options_.context), options_.page_tokens),
      forward_(model, prefill_block(options_, options.press, head_capacity(options)), options_.context),
      press_(options.press),
      budget_(options.budget),
      n_predict_(options.n_predict),
      seed_(options.seed) {}

void Session::timed(void (Press::*hook)(PressContext&)) {
  const auto start = Clock::now();
  (press_->*hook)(*this);
  score_ms_ += ms_since(start);
}

void Session::check_not_prefilling(const char* what) const {
  if (pending_) fail("{} while a prefill is in progress (finish it with prefill_step)", what);
}

int Session::prefill_step() {
  if (!pending_) fail("prefill_step: no prefill in progress (begin_prefill first)");
  PendingBlocks& p = *pending_;
  const bool hooks = p.turn && press_ != nullptr;
  const int n = int(std::min<size_t>(forward_.max_block(), p.tokens.size() - p.done));
  if (hooks) press_->before_prefill_block(*this, n);
  const float* logits = forward_.run(p.tokens.data() + p.done, n, n_past_, cache_, pool_, p.all_logits != nullptr);
  const size_t n_vocab = size_t(model_.config().n_vocab);
  if (p.all_logits) {
    p.all_logits->insert(p.all_logits->end(), logits, logits + size_t(n) * n_vocab);
    logits += size_t(n - 1) * n_vocab;
  }
  n_past_ += n;
  cache_.slide_windows(n_past_);  // local layers keep only what the next token sees
  p.done += size_t(n);
  const bool last = p.done == p.tokens.size();
  // Block hooks may run appended rows or pseudo responses, which reuse the forward buffers: keep
  // the turn's last logits before they run.
  if (last) last_logits_.assign(logits, logits + n_vocab);
  if (hooks) timed(&Press::after_prefill_block);
  if (last) finish_pending(p.turn);
  return n;
}

void Session::finish_pending(bool turn) {
  pending_.reset();
  if (press_) {
    if (turn) {
      cache_.set_probe(nullptr);
      timed(&Press::end_prefill);
    } else {
      timed(&Press::after_extend);
    }
  }
  install_decode_observers();
  reserve_decode_pages();
}

void Session::run_pending() {
  while (pending_) prefill_step();
}

void Session::install_decode_observers() {
  cache_.set_probe(press_ ? press_->decode_probe() : nullptr);
  cache_.set_sparse_selector(press_ ? press_->sparse_selector() : nullptr);
}

void Session::check_turn_fits(int64_t n, int64_t rewind_to) const {
  int64_t largest = 0;
  for (int l = 0; l < cache_.n_layers(); ++l)
    for (int h = 0; h < cache_.n_kv_heads(); ++h) {
      const HeadCache& head = cache_.head(l, h);
      int64_t size = head.size();
      while (size > 0 && head.position(size - 1) >= rewind_to) --size;
      largest = std::max(largest, size);
    }
  // A block-wise method (KeyDiff, prefill=block) cuts each head back to the budget after every
  // block, so a long turn needs room for one block above the budget only (or above what the head
  // holds, when that is more: the first block lands before any eviction).
  int64_t needed = largest + n;
  if (press_ && press_->evicts_each_prefill_block() && budget_ != kNoBudget)
    needed = std::min(needed, std::max(largest, budget_) + std::min<int64_t>(n, forward_.max_block()));
  if (needed > cache_.capacity())
    fail("a turn of {} tokens does not fit: the cache holds up to {} tokens per head and {} are in use (--ctx)", n,
         cache_.capacity(), largest);
}

const float* Session::feed_turn(const std::vector<int32_t>& tokens, int n_predict) {
  begin_prefill(tokens, n_predict);
  run_pending();
  return last_logits_.data();
}

void Session::begin_prefill(const std::vector<int32_t>& tokens, int n_predict) {
  check_not_prefilling("feed_turn");
  if (tokens.empty()) fail("cannot prefill an empty prompt");
  check_turn_fits(int64_t(tokens.size()), n_past_);
  n_predict_ = n_predict;
  const std::vector<int32_t> prompt_before = prompt_;
  history_.insert(history_.end(), tokens.begin(), tokens.end());
  prompt_ = history_;
  if (press_) {
    try {  // a method refusing to start (LookaheadKV's adapter for another model) changes nothing
      if (turns_ == 0)
        press_->begin(*this);
      else
        press_->begin_turn(*this);
    } catch (...) {
      history_.resize(history_.size() - tokens.size());
      prompt_ = prompt_before;
      throw;
    }
    cache_.set_probe(press_->prefill_probe());
  }
  cache_.set_sparse_selector(nullptr);
  ++turns_;
  pending_ = PendingBlocks{tokens, 0, true, nullptr};
}

void Session::rewind(int64_t n) {
  check_not_prefilling("rewind");
  if (n < 0 || n > n_past_) fail("cannot rewind to position {} of a history of {} tokens", n, n_past_);
  if (n == n_past_) return;
  if (!can_rewind(n))
    fail("cannot rewind to position {}: the sliding-window layers no longer hold the {} tokens before it", n, n - 1);
  for (int l = 0; l < cache_.n_layers(); ++l)
    for (int h = 0; h < cache_.n_kv_heads(); ++h) {
      HeadCache& head = cache_.head(l, h);
      int64_t keep = head.size();  // positions ascend: drop the tail at positions >= n
      while (keep > 0 && head.position(keep - 1) >= n) --keep;
      head.truncate(keep, cache_.pool());
    }
  history_.resize(size_t(n));
  n_past_ = n;
  if (prompt_.size() > history_.size()) prompt_ = history_;
  if (press_) press_->rewind(*this);
}

bool Session::can_rewind(int64_t n) const {
  // A local layer dropped what lies before its window; after a rewind to n the next token needs
  // positions (n - window, n) again.
  for (int l = 0; l < cache_.n_layers(); ++l) {
    if (!cache_.is_local(l) || n >= n_past_) continue;
    const int64_t needed = std::max<int64_t>(0, n - cache_.window(l) + 1);
    for (int h = 0; h < cache_.n_kv_heads(); ++h) {
      const HeadCache& head = cache_.head(l, h);
      if (needed < n && (head.size() == 0 || head.position(0) > needed)) return false;
    }
  }
  return true;
}

void Session::restore(Snapshot snapshot) {
  history_ = std::move(snapshot.history);
  prompt_ = std::move(snapshot.prompt);
  last_logits_ = std::move(snapshot.last_logits);
  turns_ = snapshot.turns;
  n_past_ = int64_t(history_.size());
}

const float* Session::extend(const std::vector<int32_t>& tokens, std::vector<float>* all_logits) {
  if (prompt_.empty()) fail("extend needs a prefilled prompt");
  if (tokens.empty()) fail("cannot extend with no tokens");
  check_not_prefilling("extend");
  cache_.set_probe(nullptr);
  cache_.set_sparse_selector(nullptr);
  history_.insert(history_.end(), tokens.begin(), tokens.end());
  if (all_logits) all_logits->clear();
  pending_ = PendingBlocks{tokens, 0, false, all_logits};
  run_pending();
  return last_logits_.data();
}

void Session::reserve_decode_pages() {
  PagePool& pages = cache_.pool();
  const int64_t heads = int64_t(cache_.n_layers()) * cache_.n_kv_heads();
  const int64_t per_head = (n_predict_ + pages.page_tokens() - 1) / pages.page_tokens() + 1;
  pages.reserve(int64_t(pages.bytes_in_use() / pages.page_bytes()) + heads * per_head);
}

const float* Session::decode(int32_t token) {
  check_not_prefilling("decode");
  // The output projection writes straight into last_logits_: no copy per step.
  last_logits_.resize(size_t(model_.config().n_vocab));
  forward_.run(&token, 1, n_past_, cache_, pool_, false, last_logits_.data());
  ++n_past_;
  cache_.slide_windows(n_past_);
  history_.push_back(token);
  if (press_) {
    ProfileScope prof(ProfOp::PressHooks);
    timed(&Press::after_decode_step);
  }
  return last_logits_.data();
}

void Session::with_room_for(int64_t extra_tokens, const std::function<void()>& work) {
  const int64_t capacity = cache_.capacity();
  int64_t largest = 0;
  for (int l = 0; l < cache_.n_layers(); ++l) largest = std::max(largest, cache_.n_tokens(l));
  cache_.set_capacity(std::max(capacity, largest + extra_tokens));
  const std::vector<int64_t> sizes = head_sizes();
  work();
  cache_.set_probe(nullptr);
  truncate_heads(sizes);
  cache_.set_capacity(capacity);
}

std::vector<int64_t> Session::head_sizes() const {
  std::vector<int64_t> sizes;
  for (int l = 0; l < cache_.n_layers(); ++l)
    for (int h = 0; h < cache_.n_kv_heads(); ++h) sizes.push_back(cache_.head(l, h).size());
  return sizes;
}

void Session::truncate_heads(const std::vector<int64_t>& sizes) {
  size_t i = 0;
  for (int l = 0; l < cache_.n_layers(); ++l)
    for (int h = 0; h < cache_.n_kv_heads(); ++h) cache_.head(l, h).truncate(sizes[i++], cache_.pool());
}

void Session::run_appended_blocks(int64_t n, AttentionProbe* probe,
                                  const std::function<void(int64_t, int)>& run_block) {
  with_room_for(n, [&] {
    cache_.set_probe(probe);
    for (int64_t start = 0; start < n; start += forward_.max_block())
      run_block(start, int(std::min<int64_t>(forward_.max_block(), n - start)));
  });
}

void Session::run_appended(const std::vector<int32_t>& tokens, AttentionProbe* probe) {
  run_appended_blocks(int64_t(tokens.size()), probe, [&](int64_t start, int n) {
    forward_.run(tokens.data() + start, n, n_past_ + start, cache_, pool_);
  });
}

void Session::run_appended_rows(const float* rows, int n, const LoraAdapter* lora, AttentionProbe* probe) {
  const int dim = model_.config().dim;
  run_appended_blocks(n, probe, [&](int64_t start, int len) {
    forward_.run_rows(rows + start * dim, len, n_past_ + start, cache_, pool_, lora);
  });
}

uint64_t Session::model_fingerprint() const { return kvslim::model_fingerprint(model_); }

std::vector<int32_t> Session::generate_pseudo(int n, AttentionProbe* probe) {
  const int n_vocab = model_.config().n_vocab;
  std::vector<int32_t> tokens;
  with_room_for(n, [&] {
    cache_.set_probe(probe);
    int32_t token = argmax(last_logits_.data(), n_vocab);
    for (int i = 0; i < n; ++i) {
      tokens.push_back(token);
      const float* logits = forward_.run(&token, 1, n_past_ + i, cache_, pool_);
      token = argmax(logits, n_vocab);
    }
  });
  return tokens;
}

void Session::keep(int layer, int kv_head, std::span<const int32_t> indices) {
  if (cache_.is_local(layer))
    fail("eviction on layer {}, a sliding-window layer: methods govern the global layers only", layer);
  cache_.head(layer, kv_head).retain(indices, cache_.pool());
}

void Session::record_scores(int layer, int kv_head, std::span<const float> scores) {
  if (recorded_scores_.empty()) return;
  recorded_scores_[size_t(layer) * cache_.n_kv_heads() + kv_head].assign(scores.begin(), scores.end());
}

std::optional<TokenCost> Session::token_cost() const {
  if (press_) {
    if (std::optional<TokenCost> own = press_->token_cost()) return own;
    if (press_->sparse_selector()) return std::nullopt;
  }
  const double per_head = double(cache_.total_tokens()) / double(cache_.n_layers() * cache_.n_kv_heads());
  return TokenCost{per_head, per_head};
}

void validate_prompt(const Model& model, const EngineOptions& options, const std::vector<int32_t>& prompt) {
  if (prompt.empty()) fail("the prompt is empty (no tokens)");
  if (int64_t(prompt.size()) > options.context)
    fail("the prompt has {} tokens, more than the context size of {} (--ctx)", prompt.size(), options.context);
  const int n_vocab = model.config().n_vocab;
  for (size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || prompt[i] >= n_vocab)
      fail("prompt token #{} has id {}, outside the vocabulary [0, {})", i, prompt[i], n_vocab);
}

}  // namespace kvslim
