#include "eval/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "kv/paged_cache.h"
#include "model/forward.h"
#include "util/error.h"

namespace kvslim::eval {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

bool compresses(const CompressionOptions& c) { return c.press != "full" || c.budget || c.ratio; }

// Logits of positions first .. ctx-1 of one chunk, uncompressed: blocks of `batch` over the
// first half (no logits kept), then the second half with every row's logits.
std::vector<float> plain_chunk_logits(const Model& model, ThreadPool& pool, const std::vector<int32_t>& chunk,
                                      int first, const PerplexityOptions& options) {
  const int ctx = int(chunk.size());
  PagedKvCache cache(kv_shape(model, options.cache_type_k, options.cache_type_v), ctx, options.page_tokens);
  Forward forward(model, std::min(options.batch, ctx), ctx);
  const size_t n_vocab = size_t(model.config().n_vocab);
  std::vector<float> logits;
  logits.reserve(size_t(ctx - first) * n_vocab);
  for (int start = 0; start < ctx;) {
    // A block never straddles `first`, so that only second-half rows pay for the output layer.
    const int end = std::min(start + forward.max_block(), start < first ? first : ctx);
    const int n = end - start;
    const bool scored = start >= first;
    const float* out = forward.run(chunk.data() + start, n, start, cache, pool, scored);
    if (scored) logits.insert(logits.end(), out, out + size_t(n) * n_vocab);
    start = end;
  }
  return logits;
}

// The same with the first half compressed by the press (see the header).
std::vector<float> pressed_chunk_logits(const Model& model, ThreadPool& pool, const std::vector<int32_t>& chunk,
                                        int first, const PerplexityOptions& options, double& kept_tokens) {
  const PreparedCompression c = options.compression.prepare();
  const int ctx = int(chunk.size());
  EngineOptions engine;
  engine.context = ctx;
  engine.batch = options.batch;
  engine.page_tokens = options.page_tokens;
  engine.cache_type_k = options.cache_type_k;
  engine.cache_type_v = options.cache_type_v;
  Session session(model, pool,
                  {.engine = engine,
                   .capacity = ctx,
                   .press = c.press.get(),
                   .budget = c.budget_for(first),
                   .n_predict = ctx - first});
  session.prefill(std::vector<int32_t>(chunk.begin(), chunk.begin() + first));
  const PagedKvCache& kv = session.kv();
  kept_tokens = double(kv.total_tokens()) / (double(kv.n_layers()) * kv.n_kv_heads());
  std::vector<float> logits;
  session.extend(std::vector<int32_t>(chunk.begin() + first, chunk.end()), &logits);
  return logits;
}

}  // namespace

std::vector<int32_t> perplexity_tokens(const Model& model, std::string_view text) {
  const Tokenizer& tokenizer = model.tokenizer();
  return tokenizer.encode(text, tokenizer.add_bos_by_default(), /*parse_special=*/false);
}

double token_nll(const float* logits, int n_vocab, int32_t token) {
  const float max_logit = *std::max_element(logits, logits + n_vocab);
  double sum = 0;
  for (int i = 0; i < n_vocab; ++i) sum += std::exp(double(logits[i]) - double(max_logit));
  return double(max_logit) + std::log(sum) - double(logits[token]);
}

PerplexityResult perplexity(const Model& model, ThreadPool& pool, const std::vector<int32_t>& tokens,
                            const PerplexityOptions& options, const PerplexityProgress& progress) {
  const int ctx = options.ctx;
  if (ctx < 4) fail("--ctx must be >= 4 for perplexity (got {})", ctx);
  if (options.batch < 1) fail("--batch must be >= 1 (got {})", options.batch);
  // The method is built once here so that every error (--prefill-evict block on a method without
  // it included) comes before any work, even where no chunk will run it (full without a budget).
  options.compression.prepare();
  if (int64_t(tokens.size()) < 2 * int64_t(ctx)) {
    fail("the text has {} tokens; perplexity with --ctx {} needs at least {}", tokens.size(), ctx, 2 * int64_t(ctx));
  }
  const int n_vocab = model.config().n_vocab;
  for (int32_t t : tokens) {
    if (t < 0 || t >= n_vocab) fail("token id {} is outside the vocabulary of {}", t, n_vocab);
  }
  const int available = int(tokens.size() / size_t(ctx));
  const int n_chunks = options.chunks < 0 ? available : std::min(options.chunks, available);
  if (n_chunks < 1) fail("--chunks must be >= 1 (got {})", options.chunks);
  const int first = ctx / 2;
  const Tokenizer& tokenizer = model.tokenizer();
  const bool replace_bos = tokenizer.add_bos_by_default() && tokenizer.bos_id() >= 0;
  const bool pressed = compresses(options.compression);

  PerplexityResult result;
  result.tokens_total = int64_t(tokens.size());
  const auto start = Clock::now();
  double nll = 0, nll2 = 0;
  int64_t count = 0;
  for (int i = 0; i < n_chunks; ++i) {
    const auto chunk_start = Clock::now();
    std::vector<int32_t> chunk(tokens.begin() + int64_t(i) * ctx, tokens.begin() + int64_t(i + 1) * ctx);
    if (replace_bos) chunk[0] = tokenizer.bos_id();
    PerplexityChunk out;
    const std::vector<float> logits = pressed
                                          ? pressed_chunk_logits(model, pool, chunk, first, options, out.kept_tokens)
                                          : plain_chunk_logits(model, pool, chunk, first, options);
    if (!pressed) out.kept_tokens = first;
    // Row r holds the logits at position first + r, which predict the token at first + r + 1.
    for (int r = 0; r + first + 1 < ctx; ++r) {
      const double v = token_nll(logits.data() + size_t(r) * size_t(n_vocab), n_vocab, chunk[first + r + 1]);
      out.nll += v;
      nll += v;
      nll2 += v * v;
      ++out.scored;
    }
    count += out.scored;
    out.ppl = std::exp(out.nll / out.scored);
    out.cumulative_ppl = std::exp(nll / double(count));
    out.seconds = seconds_since(chunk_start);
    result.chunks.push_back(out);
    if (progress) progress(i + 1, n_chunks, seconds_since(start));
  }
  result.tokens_scored = count;
  result.seconds = seconds_since(start);
  const double mean = nll / double(count);
  result.ppl = std::exp(mean);
  // llama.cpp's uncertainty: the standard error of the mean nll, carried to ppl.
  const double var = nll2 / double(count) - mean * mean;
  result.ppl_error = var > 0 && count > 1 ? std::sqrt(var / double(count - 1)) * result.ppl : 0.0;
  return result;
}

}  // namespace kvslim::eval
