// One slot of the server: a session whose KV cache outlives the request, the tokens it holds, and
// the job it is running. The scheduler calls step() round-robin over busy slots; each call does one
// unit of work (one prefill block of the prompt's new tokens, or one generated token) so that
// slots take turns fairly: a long prompt does not stall the others' answers.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/harmony_channels.h"
#include "engine/session.h"
#include "model/model.h"
#include "server/job.h"
#include "server/text_stream.h"

namespace kvslim::server {

// Identifies a compression configuration: a slot's cache can only be continued by requests that
// compress the same way.
std::string compression_key(const CompressionOptions& c);

// KV bytes `tokens` cost in every (layer, KV head), uncompressed, rounded up to pages (plus the
// one page per head the session reserves for decode).
uint64_t kv_bytes_for(const ModelConfig& config, const EngineOptions& engine, int64_t tokens);

class Slot {
 public:
  Slot(int id, const Model& model, ThreadPool& pool, const EngineOptions& engine);

  int id() const { return id_; }
  bool has_job() const { return job_ != nullptr; }
  // The tokens the slot's session has run (its history, in position order).
  const std::vector<int32_t>& tokens() const;
  const std::string& key() const { return key_; }
  std::chrono::steady_clock::time_point last_used() const { return last_used_; }
  // History tokens a request compressing as `key` keeps: the common prefix with `prompt` (at
  // least one prompt token must run to give logits); 0 when the slot must start afresh.
  size_t reusable(const std::vector<int32_t>& prompt, const std::string& key) const;

  // Compressed-KV files (engine/kv_file.h) of an idle slot; restore replaces the slot's session
  // only once the whole file has been read and applied. Both return a JSON summary.
  nlohmann::json save(const std::string& path) const;
  nlohmann::json restore(const std::string& path);

  void start(std::shared_ptr<GenerationJob> job);
  // One unit of work; returns true when the job has finished. Its result is then result() until
  // deliver() hands it to the waiting handler (the scheduler first marks the slot idle, so a
  // client that got its answer finds the slot free).
  bool step();
  const JobResult& result() const { return result_; }
  void deliver();
  void reset();  // drops the cache (an idle slot only)

  uint64_t kv_bytes() const;  // KV bytes the slot's cache holds now
  // The most its session ever held (prefill holds a whole turn before the method evicts).
  uint64_t kv_peak_bytes() const;
  const std::shared_ptr<GenerationJob>& job() const { return job_; }
  // For /slots; a busy slot (owned by the scheduler thread) only reports that it is busy.
  nlohmann::json info(bool busy) const;

  // Counters the metrics read after each step (per head: tokens that went in and were dropped).
  int64_t evicted_last_step() const { return evicted_last_step_; }

 private:
  void begin();          // sets up the prompt's new part: continue the cache or start afresh
  void prefill_block();  // runs one block of it; the last one fills in the result
  bool generate_one();   // samples one token; true when finished
  void finish(const std::string& reason, std::optional<std::string> error = std::nullopt);
  nlohmann::json kept_map() const;
  int64_t cached_total() const;

  int id_;
  const Model& model_;
  ThreadPool& pool_;
  EngineOptions engine_;

  std::unique_ptr<Press> press_;
  std::unique_ptr<Session> session_;
  std::string key_;
  std::vector<std::string> press_options_;  // of the session's method (saved in KV files)
  std::chrono::steady_clock::time_point last_used_{};

  std::shared_ptr<GenerationJob> job_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<TextStream> text_;
  std::optional<HarmonyChannels> channels_;  // a chat job on a harmony model (gpt-oss)
  const float* logits_ = nullptr;
  bool begun_ = false;
  JobResult result_;
  std::optional<std::string> error_;
  std::chrono::steady_clock::time_point decode_start_{};
  int64_t evicted_last_step_ = 0;
};

}  // namespace kvslim::server
