// Perplexity of a model over a text, computed the way llama.cpp's llama-perplexity computes it,
// so that the two numbers can be compared directly:
//   * the whole text is tokenized once, with BOS first when the vocabulary adds one;
//   * it is cut into consecutive chunks of `ctx` tokens (a tail shorter than ctx is dropped);
//   * each chunk is run from an empty cache with its first token replaced by BOS;
//   * only the second half is scored: the logits at positions first .. ctx-2 (first = ctx/2)
//     predict tokens first+1 .. ctx-1, i.e. ctx - first - 1 tokens per chunk;
//   * ppl = exp(mean negative log-likelihood over every scored token of every chunk).
// With a compression method, each chunk's first half (positions 0 .. first-1) is prefilled
// through a Session with the press and compressed to the budget; then the second half
// (first .. ctx-1) is fed uncompressed with Session::extend (the press sees none of it) and
// its logits are scored as above. So every scored token attends to the compressed first half
// plus the exact second half before it.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "engine/session.h"
#include "model/model.h"
#include "util/thread_pool.h"

namespace kvslim::eval {

struct PerplexityOptions {
  int ctx = 512;    // tokens per chunk
  int batch = 512;  // forward block size
  int chunks = -1;  // chunks to score (-1: all that fit)
  int page_tokens = 256;
  // KV page types (llama-perplexity's default is f16 too; f32 reproduces its -ctk f32 -ctv f32).
  DType cache_type_k = DType::F16, cache_type_v = DType::F16;
  CompressionOptions compression;  // press "full" without budget/ratio: no compression
};

struct PerplexityChunk {
  double nll = 0;             // summed negative log-likelihood of the chunk's scored tokens
  int scored = 0;             // tokens scored in the chunk
  double ppl = 0;             // exp(nll / scored): this chunk alone
  double cumulative_ppl = 0;  // over chunks 0..this (what llama-perplexity prints as [i])
  double seconds = 0;
  double kept_tokens = 0;  // mean tokens per (layer, KV head) after compressing the first half
};

struct PerplexityResult {
  double ppl = 0;
  double ppl_error = 0;      // llama.cpp's "+/-": ppl * standard error of the mean nll
  int64_t tokens_total = 0;  // tokens in the text (BOS included)
  int64_t tokens_scored = 0;
  double seconds = 0;
  std::vector<PerplexityChunk> chunks;
};

// The text's tokens as llama-perplexity sees them: BOS first when the vocabulary adds one, no
// special-token parsing.
std::vector<int32_t> perplexity_tokens(const Model& model, std::string_view text);

// Negative log-likelihood of `token` under `logits` (log-softmax in double precision).
double token_nll(const float* logits, int n_vocab, int32_t token);

// Called after each chunk with (chunks done, chunks total, seconds elapsed).
using PerplexityProgress = std::function<void(int, int, double)>;

// Throws kvslim::Error when the text is shorter than 2 * ctx tokens (as llama-perplexity
// refuses it), for ctx < 4, or for a bad method or budget.
PerplexityResult perplexity(const Model& model, ThreadPool& pool, const std::vector<int32_t>& tokens,
                            const PerplexityOptions& options, const PerplexityProgress& progress = {});

}  // namespace kvslim::eval
