// Intrinsic metrics of a compression method on one prompt, measured on the model's own outputs
// (no task-capable model needed), against the full cache:
//   recall@B    the method's kept prompt positions vs the oracle set (eval/oracle.h);
//   attn_error  relative L2 error of each layer's attention output (before the output
//               projection) over the first N decode steps, both caches fed the full cache's
//               greedy tokens; the mean over steps and layers;
//   kl          KL(full || compressed) of the next-token distribution, teacher-forced on the
//               full cache's greedy continuation (or a given one); the mean over steps;
//   ppl_ratio   perplexity of the compressed cache / of the full cache on the same tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "engine/session.h"
#include "eval/protocol.h"
#include "press/attention_accumulator.h"

namespace kvslim::eval {

struct IntrinsicOptions {
  bool recall = false, attn_error = false, kl = false;  // kl brings ppl_ratio along
  int response_tokens = 32;                             // N: the greedy response's length
  std::vector<int32_t> continuation;                    // when set, kl and ppl_ratio are teacher-forced on it
  bool any() const { return recall || attn_error || kl; }
  void validate(int n_vocab) const;  // throws kvslim::Error for N < 1 or ids outside the vocabulary
};

// What the full cache does on one prompt: computed once per sample, compared with every method.
struct FullReference {
  int64_t n_keys = 0;                       // compressed prompt tokens (the positions recall ranks)
  std::vector<int32_t> response;            // the greedy response, N tokens
  AttentionAccumulator response_attention;  // its queries' attention on the compressed prompt
  std::vector<float> attention;             // [step][layer][q_dim] while feeding response[step]
  std::vector<int32_t> forced;              // the tokens kl is teacher-forced on
  std::vector<float> logits;                // [step][n_vocab] just before forced[step]
};

FullReference run_full_reference(const Model& model, ThreadPool& pool, const EngineOptions& engine,
                                 const PromptTokens& prompt, const IntrinsicOptions& options);

struct IntrinsicResult {
  std::optional<double> recall, attn_error, kl, ppl_ratio;
};

// `make_press` builds a fresh instance of the method (each teacher-forced run needs its own);
// `budget` as for Session (kNoBudget: no limit), `seed` the method's seed.
IntrinsicResult measure_intrinsic(const Model& model, ThreadPool& pool, const EngineOptions& engine,
                                  const PromptTokens& prompt, const FullReference& reference,
                                  const std::function<std::unique_ptr<Press>()>& make_press, int64_t budget,
                                  uint64_t seed, const IntrinsicOptions& options);

}  // namespace kvslim::eval
