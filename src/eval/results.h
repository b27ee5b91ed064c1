// Per-sample results of a sweep: one JSON object per line of samples.jsonl, appended as each run
// finishes, so that an interrupted sweep resumes where it stopped (runs whose key is already in
// the file are skipped) and shards can be merged.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvslim::eval {

struct SampleRecord {
  std::string method;  // as given to --methods, options included ("snapkv:window=16")
  int64_t budget = 0;  // tokens per (layer, KV head); 0 for `full`
  std::string task;    // task label: the task, TASK@DEPTH on the NIAH grid, or a LongBench dataset
  int64_t length = 0;  // requested prompt length in tokens
  double depth = -1;   // requested needle depth, -1 when none was requested
  uint64_t seed = 0;
  std::string protocol;  // query-aware or query-agnostic
  double score = 0;      // in [0, 1]
  double partial = 0;    // passkey partial credit (= score for other tasks)
  std::optional<double> recall, attn_error, kl, ppl_ratio;
  int64_t n_prompt = 0;    // tokens actually fed (compressed + appended)
  double kept_tokens = 0;  // mean compressed-prompt tokens per (layer, KV head) after prefill
  // Storage and per-step traffic per (layer, KV head) in token-equivalents (Session::token_cost).
  std::optional<double> storage_tokens, traffic_tokens;
  uint64_t kv_bytes = 0;  // KV bytes in use once the prompt is cached (after eviction)
  uint64_t kv_bytes_peak = 0;
  double prefill_ms = 0, score_ms = 0, decode_ms = 0;
  int64_t decode_steps = 0;  // one-token forward passes decode_ms covers
  std::string output;

  // What makes a run unique: method, budget, task, length, depth, seed, protocol.
  std::string key() const;
};

nlohmann::json to_json(const SampleRecord& record);
// Throws kvslim::Error naming the missing or mistyped field.
SampleRecord record_from_json(const nlohmann::json& j);

// Every record of a samples.jsonl (an absent file has none). A malformed line is an error naming
// the file and the line number, except an unterminated last line: a run interrupted while
// writing, which is dropped.
std::vector<SampleRecord> read_records(const std::string& path);

// Appends records to a samples.jsonl, one flushed line each. Opening creates the directory,
// fails with a clear error when it cannot be written, and cuts an unterminated last line.
class RecordWriter {
 public:
  explicit RecordWriter(const std::string& path);
  ~RecordWriter();
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;
  void append(const SampleRecord& record);

 private:
  std::string path_;
  FILE* file_ = nullptr;
};

// The records with duplicate keys dropped (the first occurrence stays), in their order.
std::vector<SampleRecord> without_duplicates(const std::vector<SampleRecord>& records);

}  // namespace kvslim::eval
