// Counters and gauges of the server, rendered as Prometheus text for GET /metrics. Names follow
// llama.cpp's server (prefix kvslim: instead of llamacpp:) plus what only kvslim has: KV bytes in
// use and at peak, the kept-token ratio, evictions and the methods' scoring time.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace kvslim::server {

class Metrics {
 public:
  void request(const std::string& endpoint, int status);
  // One finished generation.
  void generation(int prompt_tokens, int reused_tokens, int generated_tokens, double prefill_ms, double decode_ms,
                  double score_ms, double kept_per_head, bool cancelled);
  void evicted(int64_t head_tokens);
  // After every scheduler step: the bytes held now, and the most held during the step.
  void kv_bytes(uint64_t in_use, uint64_t peak_during_step);
  void queue(int processing, int deferred);

  uint64_t kv_bytes_in_use() const;
  uint64_t kv_bytes_peak() const;
  std::string prometheus(int n_slots) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, uint64_t> requests_;  // "endpoint status" -> count
  uint64_t prompt_tokens_ = 0, reused_tokens_ = 0, generated_tokens_ = 0, generations_ = 0, cancelled_ = 0;
  double prefill_ms_ = 0, decode_ms_ = 0, score_ms_ = 0;
  double kept_tokens_ = 0, prefilled_tokens_ = 0;  // per head, for the kept ratio
  uint64_t evicted_ = 0;
  uint64_t kv_in_use_ = 0, kv_peak_ = 0;
  int processing_ = 0, deferred_ = 0;
};

}  // namespace kvslim::server
