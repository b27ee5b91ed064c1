#include "engine/session.h"

#include <algorithm>
#include <chrono>

#include "kv/dense_cache.h"
#include "util/error.h"

namespace kvslim {

void EngineOptions::validate() const {
  if (context < 1) fail("--ctx must be >= 1 (got {})", context);
  if (batch < 1) fail("--batch must be >= 1 (got {})", batch);
}

Session::Session(const Model& model, ThreadPool& pool, const EngineOptions& options, int64_t capacity)
    : model_(model),
      pool_(pool),
      options_(options),
      cache_(std::make_unique<DenseKvCache>(model.config(), std::min<int64_t>(capacity, options.context))),
      forward_(model, std::max(1, std::min<int>(options.batch, capacity))) {
  options_.validate();
}

const float* Session::prefill(const std::vector<int32_t>& tokens) {
  if (tokens.empty()) fail("cannot prefill an empty prompt");
  const float* logits = nullptr;
  for (size_t start = 0; start < tokens.size(); start += forward_.max_block()) {
    const int n = int(std::min<size_t>(forward_.max_block(), tokens.size() - start));
    logits = forward_.run(tokens.data() + start, n, n_past_, *cache_, pool_);
    n_past_ += n;
  }
  return logits;
}

const float* Session::decode(int32_t token) {
  const float* logits = forward_.run(&token, 1, n_past_, *cache_, pool_);
  ++n_past_;
  return logits;
}

namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

void validate_prompt(const Model& model, const EngineOptions& options, const GenerateRequest& request) {
  options.validate();
  request.sampling.validate();
  if (request.prompt.empty()) fail("the prompt is empty (no tokens)");
  if (request.n_predict < 0) fail("-n must be >= 0 (got {})", request.n_predict);
  if (int64_t(request.prompt.size()) > options.context)
    fail("the prompt has {} tokens, more than the context size of {} (--ctx)", request.prompt.size(), options.context);
  const int n_vocab = model.config().n_vocab;
  for (size_t i = 0; i < request.prompt.size(); ++i)
    if (request.prompt[i] < 0 || request.prompt[i] >= n_vocab)
      fail("prompt token #{} has id {}, outside the vocabulary [0, {})", i, request.prompt[i], n_vocab);
}

}  // namespace

GenerateResult generate(const Model& model, ThreadPool& pool, const EngineOptions& options,
                        const GenerateRequest& request, const std::function<void(const std::string&)>& on_piece) {
  validate_prompt(model, options, request);
  const int64_t capacity = std::min<int64_t>(options.context, int64_t(request.prompt.size()) + request.n_predict);
  Session session(model, pool, options, capacity);
  Sampler sampler(request.sampling, model.config().n_vocab);
  const Tokenizer& tokenizer = model.tokenizer();

  GenerateResult result;
  result.n_prompt = int(request.prompt.size());
  result.stop_reason = "length";
  std::vector<int32_t> history = request.prompt;
  history.reserve(request.prompt.size() + request.n_predict);

  auto start = std::chrono::steady_clock::now();
  const float* logits = session.prefill(request.prompt);
  result.prefill_ms = ms_since(start);

  start = std::chrono::steady_clock::now();
  for (int i = 0; i < request.n_predict; ++i) {
    const int32_t token = sampler.sample(logits, history);
    if (tokenizer.is_end_of_generation(token)) {
      result.stop_reason = "eos";
      break;
    }
    history.push_back(token);
    result.tokens.push_back(token);
    const std::string piece = tokenizer.token_to_piece(token);
    result.text += piece;
    if (on_piece) on_piece(piece);
    if (i + 1 == request.n_predict) break;  // the last token needs no forward pass
    if (session.n_past() >= session.cache().capacity()) {
      result.stop_reason = "context";
      break;
    }
    logits = session.decode(token);
    ++result.decode_steps;
  }
  result.decode_ms = ms_since(start);
  result.kv_bytes_peak = session.cache().peak_bytes();
  result.kv_bytes_final = session.cache().bytes_in_use();
  return result;
}

}  // namespace kvslim
