// `kvslim bench`: prefill and decode throughput of a model, as medians over repetitions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/session.h"
#include "model/model.h"

namespace kvslim {

struct BenchOptions {
  std::vector<int> prompt_lengths{512};
  std::vector<int> context_lengths{512};
  int reps = 3;
  int decode_tokens = 16;  // tokens decoded per repetition at each context length
  int batch = 512;
  uint64_t seed = 1;
  // Time each op of the prefills and of the decode steps (and a sampling call per decode step,
  // which plain decode measurements leave out): BenchPoint::profile.
  bool profile = false;
  CompressionOptions compression;  // the method measured (prefill includes its scoring)
  EngineOptions engine;            // only the KV page types are read (batch and context are set per run)
  void validate() const;
};

struct Summary {
  double median = 0, min = 0, max = 0;
  static Summary of(std::vector<double> values);
};

// One op's share of a prefill (per prompt) or of a decode step (per token); see util/op_profile.h.
struct OpTime {
  std::string op;
  double ms = 0;
  double calls = 0;
};

struct BenchPoint {
  int length = 0;  // prompt length (prefill) or context length (decode)
  Summary tokens_per_s;
  Summary ms;             // per repetition: whole prefill, or per decoded token
  Summary score_ms;       // prefill only: time in the method's hooks
  uint64_t kv_bytes = 0;  // KV bytes held when the measurement ended
  uint64_t kv_bytes_peak = 0;
  // Per (layer, KV head) in token-equivalents once the prompt (context) is cached: what decode
  // stores and reads each step (Session::token_cost; RocketKV's own report).
  std::optional<TokenCost> token_cost;
  std::vector<OpTime> profile;  // with BenchOptions::profile only: per prompt, or per decoded token
};

struct BenchReport {
  std::vector<BenchPoint> prefill, decode;
};

// Prompts are seeded random token ids. Prefill: each repetition prefills the prompt into a
// fresh session (with the method's scoring and eviction). Decode: one session is filled to the
// context length (and compressed), then each repetition decodes `decode_tokens` tokens (so
// repetition i starts at context + i * decode_tokens).
BenchReport run_bench(const Model& model, ThreadPool& pool, const BenchOptions& options);

}  // namespace kvslim
