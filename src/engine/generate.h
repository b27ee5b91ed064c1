// One request from prompt to answer: prefill with the method's hooks (then the uncompressed
// appended tokens), then sample until EOS, n_predict or a full context. `kvslim generate`, the
// evaluation runner and the trainers' held-out checks go through it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/session.h"
#include "engine/stop_reason.h"

namespace kvslim {

struct GenerateRequest {
  std::vector<int32_t> prompt;
  std::vector<int32_t> appended;  // fed uncompressed after the prompt (Session::extend); may be empty
  int n_predict = 128;
  SamplerParams sampling;
  CompressionOptions compression;
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (the end-of-generation token excluded)
  std::string text;
  StopReason stop_reason = StopReason::Length;  // Eos, Length or Context
  int n_prompt = 0;                             // compressed prompt tokens (the appended ones excluded)
  int decode_steps = 0;                         // forward passes of one token (the last sampled token needs none)
  int64_t budget = 0;                           // resolved budget (0: none)
  double prefill_ms = 0, score_ms = 0, decode_ms = 0;  // prefill_ms includes the appended tokens
  double kept_tokens = 0;                              // mean tokens per (layer, KV head) after prefill
  std::optional<TokenCost> token_cost;                 // Session::token_cost after prefill
  uint64_t kv_bytes_peak = 0, kv_bytes_final = 0;
  uint64_t kv_bytes_prefill = 0;  // KV bytes in use once the prompt (and the appended tokens) is cached
  nlohmann::json kv_layers;       // per layer after prefill: kind, window, tokens, bytes (kv_layers_json)
};

// Validates the request (empty prompt, prompt longer than the context, ids outside the
// vocabulary, method and budget), prefills (then extends with the appended tokens), then
// samples until EOS, n_predict or a full context.
// `on_piece` receives each generated token's text as soon as it is sampled.
GenerateResult generate(const Model& model, ThreadPool& pool, const EngineOptions& options,
                        const GenerateRequest& request, const std::function<void(const std::string&)>& on_piece = {});

}  // namespace kvslim
