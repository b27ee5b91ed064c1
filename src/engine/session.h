// A generation session: one model, one KV cache, chunked prefill and one-token decode.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "kv/kv_cache.h"
#include "model/forward.h"
#include "model/model.h"
#include "util/thread_pool.h"

namespace kvslim {

struct EngineOptions {
  int context = 4096;  // most tokens (prompt + generated) a session may hold
  int batch = 512;     // prefill block size
  void validate() const;
};

class Session {
 public:
  // `capacity` tokens of KV are allocated up front (at most options.context).
  Session(const Model& model, ThreadPool& pool, const EngineOptions& options, int64_t capacity);

  // Prefills the tokens in blocks of options.batch; returns the last token's logits.
  const float* prefill(const std::vector<int32_t>& tokens);
  // Feeds one token at the next position; returns its logits.
  const float* decode(int32_t token);

  int64_t n_past() const { return n_past_; }
  const KvCache& cache() const { return *cache_; }

 private:
  const Model& model_;
  ThreadPool& pool_;
  EngineOptions options_;
  std::unique_ptr<KvCache> cache_;
  Forward forward_;
  int64_t n_past_ = 0;
};

struct GenerateRequest {
  std::vector<int32_t> prompt;
  int n_predict = 128;
  SamplerParams sampling;
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (the end-of-generation token excluded)
  std::string text;
  std::string stop_reason;      // "eos", "length" (n_predict reached) or "context" (context full)
  int n_prompt = 0;
  int decode_steps = 0;         // forward passes of one token (the last sampled token needs none)
  double prefill_ms = 0, decode_ms = 0;
  uint64_t kv_bytes_peak = 0, kv_bytes_final = 0;
};

// Validates the request (empty prompt, prompt longer than the context, ids outside the
// vocabulary), prefills, then samples until EOS, n_predict or a full context. `on_piece`
// receives each generated token's text as soon as it is sampled.
GenerateResult generate(const Model& model, ThreadPool& pool, const EngineOptions& options,
                        const GenerateRequest& request, const std::function<void(const std::string&)>& on_piece = {});

}  // namespace kvslim
