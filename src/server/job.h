// One generation request travelling from an HTTP handler thread to the scheduler and back: its
// inputs, a cancel flag, and a channel of events (text pieces, then the end) the handler waits on.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/session.h"

namespace kvslim::server {

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;
};

struct TokenEvent {
  int32_t id = 0;
  std::string text;       // what may be sent now (stop strings and cut UTF-8 already handled)
  std::string reasoning;  // text of a reasoning channel (gpt-oss's analysis), apart from `text`
  std::string piece;      // the token's own bytes
  float logprob = 0;
  std::vector<TokenLogprob> top;               // when the request asked for top_logprobs
  std::chrono::steady_clock::time_point time;  // when the scheduler produced it (set by push)
};

struct JobResult {
  std::string finish_reason = "length";  // "stop" (EOS or a stop string) or "length"
  int slot = -1;
  int n_prompt = 0;  // prompt tokens of this request
  int n_reused = 0;  // of which already in the slot's cache
  int n_generated = 0;
  double prefill_ms = 0, decode_ms = 0, score_ms = 0, queue_ms = 0;
  std::chrono::steady_clock::time_point admitted;  // when a slot took the job
  double kept_tokens = 0;                          // mean tokens per (layer, KV head) after prefill
  int64_t budget = 0;                              // 0: none
  std::string press;
  uint64_t kv_bytes_peak = 0, kv_bytes_final = 0, kv_bytes_full = 0;  // full: the prompt uncompressed
  nlohmann::json kv_layers;  // per layer after prefill: kind, window, tokens, bytes (kv_layers_json)
  nlohmann::json kv_map;     // {n_positions, layers: [[runs of [start, end) per KV head]]} when asked
};

struct GenerationJob {
  // Inputs, fixed before submission.
  std::vector<int32_t> prompt;
  int n_predict = 0;
  SamplerParams sampling;
  CompressionOptions compression;
  std::vector<std::string> stop;
  int top_logprobs = 0;
  bool logprobs = false;
  bool kv_map = false;
  bool split_reasoning = false;  // a chat request: a harmony model's analysis channel goes to `reasoning`
  uint64_t kv_bytes_needed = 0;  // the admission estimate (prompt + n_predict uncompressed)
  std::chrono::steady_clock::time_point submitted = std::chrono::steady_clock::now();

  std::atomic<bool> cancelled{false};  // set by the handler when the client went away

  // The channel, guarded by mutex.
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<TokenEvent> events;
  bool done = false;
  std::optional<std::string> error;  // set with done when the engine failed
  JobResult result;

  void push(TokenEvent event) {
    event.time = std::chrono::steady_clock::now();
    {
      std::lock_guard lock(mutex);
      events.push_back(std::move(event));
    }
    cv.notify_all();
  }
  void finish(JobResult r, std::optional<std::string> failure = std::nullopt) {
    {
      std::lock_guard lock(mutex);
      result = std::move(r);
      error = std::move(failure);
      done = true;
    }
    cv.notify_all();
  }
};

}  // namespace kvslim::server
