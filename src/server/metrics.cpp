#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <unistd.h>

namespace kvslim::server {

namespace {

void metric(std::string& out, const char* type, const char* name, const char* help, double value) {
  out += fmt::format("# HELP kvslim:{} {}\n# TYPE kvslim:{} {}\nkvslim:{} {}\n", name, help, name, type, name, value);
}

double per_second(double count, double ms) { return ms > 0 ? count * 1000.0 / ms : 0.0; }

uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * uint64_t(sysconf(_SC_PAGESIZE));
}

}  // namespace

void Metrics::request(const std::string& endpoint, int status) {
  std::lock_guard lock(mutex_);
  ++requests_[fmt::format("endpoint=\"{}\",status=\"{}\"", endpoint, status)];
}

void Metrics::generation(int prompt_tokens, int reused_tokens, int generated_tokens, double prefill_ms,
                         double decode_ms, double score_ms, double kept_per_head, bool cancelled) {
  std::lock_guard lock(mutex_);
  ++generations_;
  if (cancelled) ++cancelled_;
  prompt_tokens_ += uint64_t(prompt_tokens);
  reused_tokens_ += uint64_t(reused_tokens);
  generated_tokens_ += uint64_t(generated_tokens);
  prefill_ms_ += prefill_ms;
  decode_ms_ += decode_ms;
  score_ms_ += score_ms;
  kept_tokens_ += kept_per_head;
  prefilled_tokens_ += prompt_tokens;
}

void Metrics::evicted(int64_t head_tokens) {
  if (head_tokens <= 0) return;
  std::lock_guard lock(mutex_);
  evicted_ += uint64_t(head_tokens);
}

void Metrics::kv_bytes(uint64_t in_use, uint64_t peak_during_step) {
  std::lock_guard lock(mutex_);
  kv_in_use_ = in_use;
  kv_peak_ = std::max({kv_peak_, in_use, peak_during_step});
}

void Metrics::queue(int processing, int deferred) {
  std::lock_guard lock(mutex_);
  processing_ = processing;
  deferred_ = deferred;
}

uint64_t Metrics::kv_bytes_in_use() const {
  std::lock_guard lock(mutex_);
  return kv_in_use_;
}

uint64_t Metrics::kv_bytes_peak() const {
  std::lock_guard lock(mutex_);
  return kv_peak_;
}

std::string Metrics::prometheus(int n_slots) const {
  std::lock_guard lock(mutex_);
  std::string out;
  out +=
      "# HELP kvslim:requests_total HTTP requests answered, by endpoint and status.\n"
      "# TYPE kvslim:requests_total counter\n";
  for (const auto& [labels, count] : requests_) out += fmt::format("kvslim:requests_total{{{}}} {}\n", labels, count);
  metric(out, "counter", "generations_total", "Completions run by the engine (chat and text).", double(generations_));
  metric(out, "counter", "generations_cancelled_total", "Completions stopped because the client went away.",
         double(cancelled_));
  metric(out, "counter", "prompt_tokens_total", "Prompt tokens of all completions.", double(prompt_tokens_));
  metric(out, "counter", "prompt_tokens_reused_total", "Prompt tokens found in a slot's cache (not prefilled again).",
         double(reused_tokens_));
  metric(out, "counter", "tokens_predicted_total", "Generated tokens.", double(generated_tokens_));
  metric(out, "counter", "prompt_seconds_total", "Time spent prefilling.", prefill_ms_ / 1000.0);
  metric(out, "counter", "tokens_predicted_seconds_total", "Time spent generating.", decode_ms_ / 1000.0);
  metric(out, "gauge", "prompt_tokens_seconds", "Prefill throughput so far (new prompt tokens per second).",
         per_second(double(prompt_tokens_ - reused_tokens_), prefill_ms_));
  metric(out, "gauge", "predicted_tokens_seconds", "Generation throughput so far (tokens per second).",
         per_second(double(generated_tokens_), decode_ms_));
  metric(out, "gauge", "kv_bytes_in_use", "KV cache bytes held by all slots now.", double(kv_in_use_));
  metric(out, "gauge", "kv_bytes_peak",
         "Most KV cache bytes held by all slots at once since start (a prefill's transient peak included, bounded by "
         "its session's peak).",
         double(kv_peak_));
  metric(
      out, "gauge", "kv_kept_ratio",
      "Tokens kept per (layer, KV head) after prefill over prompt tokens, over all completions (1: nothing evicted).",
      prefilled_tokens_ > 0 ? kept_tokens_ / prefilled_tokens_ : 1.0);
  metric(out, "counter", "kv_evicted_tokens_total", "Tokens evicted, counted once per (layer, KV head).",
         double(evicted_));
  metric(out, "counter", "score_seconds_total", "Time the compression methods spent scoring and selecting.",
         score_ms_ / 1000.0);
  metric(out, "gauge", "requests_processing", "Completions running in a slot.", processing_);
  metric(out, "gauge", "requests_deferred", "Completions waiting for a slot.", deferred_);
  metric(out, "gauge", "slots_total", "Slots (--parallel).", n_slots);
  metric(out, "gauge", "process_resident_memory_bytes", "Resident memory of the server process.",
         double(resident_bytes()));
  return out;
}

}  // namespace kvslim::server
