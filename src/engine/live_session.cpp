#include "engine/live_session.h"

#include <algorithm>
#include <chrono>

#include "engine/kv_file.h"
#include "util/error.h"

namespace kvslim {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

OnToken pieces_only(std::function<void(const std::string&)> on_piece) {
  if (!on_piece) return {};
  return [on_piece = std::move(on_piece)](int32_t, const std::string& piece) { on_piece(piece); };
}

Answer decode_answer(Session& session, Sampler& sampler, const Tokenizer& tokenizer, const float* logits,
                     std::vector<int32_t>& history, int n_predict, const OnToken& on_token,
                     const std::atomic<bool>* stop) {
  Answer answer;
  answer.stop_reason = StopReason::Length;
  const PagedKvCache& kv = session.kv();
  const auto start = Clock::now();
  for (int i = 0; i < n_predict; ++i) {
    if (stop && stop->load()) {
      answer.stop_reason = StopReason::Interrupted;
      break;
    }
    const int32_t token = sampler.sample(logits, history);
    if (tokenizer.is_end_of_generation(token)) {
      answer.stop_reason = StopReason::Eos;
      break;
    }
    history.push_back(token);
    answer.tokens.push_back(token);
    const std::string piece = tokenizer.token_to_piece(token);
    answer.text += piece;
    if (on_token) on_token(token, piece);
    if (i + 1 == n_predict) break;  // the last token needs no forward pass
    int64_t largest_head = 0;
    for (int l = 0; l < kv.n_layers(); ++l) largest_head = std::max(largest_head, kv.n_tokens(l));
    if (largest_head >= kv.capacity()) {
      answer.stop_reason = StopReason::Context;
      break;
    }
    logits = session.decode(token);
    ++answer.decode_steps;
  }
  answer.decode_ms = ms_since(start);
  return answer;
}

LiveSession::LiveSession(const Model& model, ThreadPool& pool, const EngineOptions& options,
                         CompressionOptions compression, const SamplerParams& sampling)
    : model_(model), pool_(pool), options_(options), compression_(std::move(compression)), sampling_(sampling) {
  options_.validate();
  sampling_.validate();
  prepared_ = compression_.prepare();
  sampler_ = std::make_unique<Sampler>(sampling_, model.config().n_vocab);
}

LiveSession::~LiveSession() = default;

void LiveSession::start(int64_t budget) {
  budget_ = budget;
  session_ = std::make_unique<Session>(model_, pool_,
                                       SessionOptions{.engine = options_,
                                                      .capacity = options_.context,
                                                      .press = prepared_.press.get(),
                                                      .budget = budget,
                                                      .seed = sampling_.seed});
}

const std::vector<int32_t>& LiveSession::history() const {
  static const std::vector<int32_t> none;
  return session_ ? session_->history() : none;
}

std::vector<int32_t> LiveSession::transcript() const {
  std::vector<int32_t> t = history();
  t.insert(t.end(), pending_.begin(), pending_.end());
  return t;
}

const float* LiveSession::prompt(const std::vector<int32_t>& conversation, int n_predict) {
  if (conversation.empty()) fail("the conversation is empty (no tokens)");
  if (n_predict < 0) fail("-n must be >= 0 (got {})", n_predict);
  const int n_vocab = model_.config().n_vocab;
  for (size_t i = 0; i < conversation.size(); ++i)
    if (conversation[i] < 0 || conversation[i] >= n_vocab)
      fail("conversation token #{} has id {}, outside the vocabulary [0, {})", i, conversation[i], n_vocab);
  if (!session_) start(prepared_.budget_for(int64_t(conversation.size())));

  // Common prefix with what is cached; at least one token must run to give logits.
  const std::vector<int32_t>& cached = session_->history();
  size_t common = 0;
  while (common < cached.size() && common < conversation.size() && cached[common] == conversation[common]) ++common;
  if (common == conversation.size()) --common;
  // A sliding-window layer cannot go back before what it still holds: start afresh instead.
  const bool afresh = common < cached.size() && !session_->can_rewind(int64_t(common));
  if (afresh) common = 0;
  const int64_t dropped = int64_t(cached.size()) - int64_t(common);
  if (afresh) start(prepared_.budget_for(int64_t(conversation.size())));  // `cached` is gone from here on
  const std::vector<int32_t> turn(conversation.begin() + int64_t(common), conversation.end());

  // The turn must fit before anything is dropped: a rewind cannot be undone.
  TurnStats stats;
  stats.reused = int64_t(common);
  stats.reprefilled = dropped;
  stats.turn_tokens = int64_t(turn.size());
  const auto start = Clock::now();
  const double score_before = session_->score_ms();
  session_->check_turn_fits(int64_t(turn.size()), int64_t(common));
  if (dropped > 0 && !afresh) session_->rewind(int64_t(common));
  const float* logits = session_->feed_turn(turn, n_predict);
  stats.prefill_ms = ms_since(start);
  stats.score_ms = session_->score_ms() - score_before;
  const PagedKvCache& kv = session_->kv();
  stats.kept_tokens = double(kv.total_tokens()) / (kv.n_layers() * kv.n_kv_heads());
  stats.history = session_->n_past();
  stats.kv_bytes = kv.bytes_in_use();
  stats_ = stats;
  pending_.clear();
  answerable_ = true;
  ++turns_;
  return logits;
}

Answer LiveSession::answer(int n_predict, const OnToken& on_token, const std::atomic<bool>* stop) {
  if (!answerable_) fail("an answer needs a prompt first");
  answerable_ = false;
  std::vector<int32_t> history = session_->history();
  Answer a = decode_answer(*session_, *sampler_, model_.tokenizer(), session_->last_logits(), history, n_predict,
                           on_token, stop);
  // Every answer token but the last ran through the model; the last waits for the next turn.
  if (!a.tokens.empty() && int64_t(history.size()) > session_->n_past()) pending_.assign(1, a.tokens.back());
  stats_.generated = int(a.tokens.size());
  stats_.decode_steps = a.decode_steps;
  stats_.decode_ms = a.decode_ms;
  stats_.stop_reason = a.stop_reason;
  stats_.history = session_->n_past();
  stats_.kv_bytes = session_->kv().bytes_in_use();
  return a;
}

const float* LiveSession::decode(int32_t token) {
  if (!session_) fail("decode needs a prompt first");
  const int n_vocab = model_.config().n_vocab;
  if (token < 0 || token >= n_vocab) fail("token id {} is outside the vocabulary [0, {})", token, n_vocab);
  std::vector<int32_t> feed = pending_;
  feed.push_back(token);
  const PagedKvCache& kv = session_->kv();
  int64_t largest_head = 0;
  for (int l = 0; l < kv.n_layers(); ++l) largest_head = std::max(largest_head, kv.n_tokens(l));
  if (largest_head + int64_t(feed.size()) > kv.capacity())
    fail("the context is full ({} tokens in the largest head, --ctx {})", largest_head, kv.capacity());
  pending_.clear();
  answerable_ = true;  // an answer may continue from here
  const float* logits = nullptr;
  for (int32_t t : feed) logits = session_->decode(t);
  stats_.history = session_->n_past();
  stats_.kv_bytes = kv.bytes_in_use();
  return logits;
}

void LiveSession::reset() {
  session_.reset();  // before the press it runs
  prepared_ = compression_.prepare();
  sampler_ = std::make_unique<Sampler>(sampling_, model_.config().n_vocab);
  pending_.clear();
  answerable_ = false;
  turns_ = 0;
  stats_ = {};
}

void LiveSession::save(const std::string& path) const {
  if (!session_) fail("nothing to save: the session has no turn yet");
  // The options the method runs with (prefill=block from --prefill-evict block included), so that
  // the loaded session runs the same method.
  KvFileMeta meta{compression_.press, prepared_.options, budget_, turns_, pending_, attachment_};
  write_kv_file(path, *session_, meta, model_);
}

std::unique_ptr<LiveSession> LiveSession::load(const std::string& path, const Model& model, ThreadPool& pool,
                                               const EngineOptions& options, const SamplerParams& sampling) {
  const KvFileContents contents = read_kv_file(path, model, options);
  CompressionOptions compression;
  compression.press = contents.meta.press;
  compression.press_options = contents.meta.press_options;
  if (contents.meta.budget != kNoBudget) compression.budget = contents.meta.budget;
  auto live = std::make_unique<LiveSession>(model, pool, options, compression, sampling);
  live->start(contents.meta.budget);
  apply_kv_file(contents, *live->session_);
  live->turns_ = contents.meta.turns;
  live->pending_ = contents.meta.pending;
  live->attachment_ = contents.meta.attachment;
  return live;
}

}  // namespace kvslim
