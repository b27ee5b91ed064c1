// A conversation's engine side: one Session that lives across turns, with its method, budget and
// sampler. Each turn hands it the whole conversation's tokens; it finds the common prefix with
// what is cached, runs only the new tokens (or, when the conversation rewrote its history,
// rewinds to the first differing token and re-prefills from there), then samples an answer.
// Used by `kvslim chat` (through chat/conversation), `eval --protocol multi-turn` and the server.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/session.h"
#include "engine/stop_reason.h"

namespace kvslim {

// What one turn did (`/stats` in chat, per-turn rows in the multi-turn eval).
struct TurnStats {
  int64_t turn_tokens = 0;  // tokens run through the model for this turn's prompt (re-prefilled included)
  int64_t reused = 0;       // conversation tokens already cached (not run again)
  int64_t reprefilled = 0;  // history tokens dropped because the conversation differs from them
  int64_t history = 0;      // tokens of the history after the turn (answer included)
  double kept_tokens = 0;   // mean tokens per (layer, KV head) after the turn's prefill
  uint64_t kv_bytes = 0;    // KV bytes in use after the answer
  double prefill_ms = 0, score_ms = 0, decode_ms = 0;
  int generated = 0, decode_steps = 0;
  StopReason stop_reason = StopReason::None;  // None before an answer

  double prefill_tokens_per_s() const { return prefill_ms > 0 ? 1000.0 * double(turn_tokens) / prefill_ms : 0; }
  double decode_tokens_per_s() const { return decode_ms > 0 ? 1000.0 * double(decode_steps) / decode_ms : 0; }
};

struct Answer {
  std::vector<int32_t> tokens;  // the end-of-generation token excluded
  std::string text;
  std::string reasoning;  // set by chat/conversation for models that reason in a channel of their own (gpt-oss)
  StopReason stop_reason = StopReason::Length;
  int decode_steps = 0;
  double decode_ms = 0;
};

// Receives each generated token and its text (empty for control tokens) as it is sampled.
using OnToken = std::function<void(int32_t token, const std::string& piece)>;
// An OnToken that hands on the text only (empty when on_piece is).
OnToken pieces_only(std::function<void(const std::string&)> on_piece);

// Samples up to n_predict tokens from `logits` (the session's last), feeding each but the last
// through the session; `history` (the repetition penalty's window) grows with them. Stops at an
// end-of-generation token, a full head, or when `stop` becomes true. The loop `generate` runs.
Answer decode_answer(Session& session, Sampler& sampler, const Tokenizer& tokenizer, const float* logits,
                     std::vector<int32_t>& history, int n_predict, const OnToken& on_token = {},
                     const std::atomic<bool>* stop = nullptr);

class LiveSession {
 public:
  // Validates and builds the method, its options and the budget (CompressionOptions::prepare;
  // kvslim::Error); no work is done yet. A --ratio budget is resolved against the first turn's
  // tokens and kept for later turns.
  LiveSession(const Model& model, ThreadPool& pool, const EngineOptions& options, CompressionOptions compression,
              const SamplerParams& sampling);
  ~LiveSession();
  LiveSession(const LiveSession&) = delete;
  LiveSession& operator=(const LiveSession&) = delete;

  // Brings the cache to `conversation` (the whole conversation so far, rendered and tokenized):
  // the common prefix with transcript() is reused, the rest runs as one turn. Throws
  // kvslim::Error (session unchanged) for an empty conversation, ids outside the vocabulary or a
  // turn that cannot fit. Returns the last token's logits.
  const float* prompt(const std::vector<int32_t>& conversation, int n_predict);
  // Samples the answer to the last prompt(); on_token gets each token as it comes.
  Answer answer(int n_predict, const OnToken& on_token = {}, const std::atomic<bool>* stop = nullptr);

  // Feeds one token after the transcript (a sampled answer token not fed yet goes first) and
  // returns its logits: token-by-token decoding driven from outside (the Python Session).
  // Throws kvslim::Error before the first prompt(), for an id outside the vocabulary or when a
  // head is full.
  const float* decode(int32_t token);

  // Forgets everything (the method and budget stay).
  void reset();

  // Writes the session as a compressed-KV file (engine/kv_file.h), atomically, with
  // attachment() (the chat layer's messages) stored alongside.
  void save(const std::string& path) const;
  // Free text a layer above keeps in the KV file (chat: the messages as JSON); "" by default.
  const std::string& attachment() const { return attachment_; }
  void set_attachment(std::string text) { attachment_ = std::move(text); }
  // A session restored from a KV file: its method, options and budget come from the file.
  // Throws kvslim::Error (one line) for another model, a truncated or corrupt file.
  static std::unique_ptr<LiveSession> load(const std::string& path, const Model& model, ThreadPool& pool,
                                           const EngineOptions& options, const SamplerParams& sampling);

  // The history plus the last sampled token that was not fed yet: what the model has seen or said.
  std::vector<int32_t> transcript() const;
  const std::vector<int32_t>& history() const;
  const TurnStats& last_turn() const { return stats_; }
  const CompressionOptions& compression() const { return compression_; }
  int64_t turns() const { return turns_; }
  // Null before the first turn.
  const Session* session() const { return session_.get(); }

 private:
  void start(int64_t budget);

  const Model& model_;
  ThreadPool& pool_;
  EngineOptions options_;
  CompressionOptions compression_;
  SamplerParams sampling_;
  PreparedCompression prepared_;      // the method (made again by reset())
  std::unique_ptr<Session> session_;  // made at the first turn (a --ratio budget needs its length)
  std::unique_ptr<Sampler> sampler_;
  int64_t budget_ = kNoBudget;
  int64_t turns_ = 0;
  std::vector<int32_t> pending_;  // the last sampled token, not fed yet
  bool answerable_ = false;       // a prompt() ran since the last answer
  std::string attachment_;
  TurnStats stats_;
};

}  // namespace kvslim
