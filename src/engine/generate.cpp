#include "engine/generate.h"

#include <chrono>

#include "engine/live_session.h"
#include "engine/kv_layers_json.h"
#include "util/error.h"

namespace kvslim {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void validate_request(const Model& model, const EngineOptions& options, const GenerateRequest& request) {
  options.validate();
  request.sampling.validate();
  request.compression.validate();
  if (request.n_predict < 0) fail("-n must be >= 0 (got {})", request.n_predict);
  validate_prompt(model, options, request.prompt);
  if (request.appended.empty()) return;
  std::vector<int32_t> whole = request.prompt;
  whole.insert(whole.end(), request.appended.begin(), request.appended.end());
  validate_prompt(model, options, whole);
}

}  // namespace

GenerateResult generate(const Model& model, ThreadPool& pool, const EngineOptions& options,
                        const GenerateRequest& request, const std::function<void(const std::string&)>& on_piece) {
  validate_request(model, options, request);
  const PreparedCompression compression = request.compression.prepare();
  const int64_t n_prompt = int64_t(request.prompt.size());
  const int64_t budget = compression.budget_for(n_prompt);
  const int64_t n_appended = int64_t(request.appended.size());
  const int64_t capacity = std::min<int64_t>(options.context, n_prompt + n_appended + request.n_predict);
  Session session(model, pool,
                  {.engine = options,
                   .capacity = capacity,
                   .press = compression.press.get(),
                   .budget = budget,
                   .n_predict = request.n_predict,
                   .seed = request.sampling.seed});
  Sampler sampler(request.sampling, model.config().n_vocab);
  const Tokenizer& tokenizer = model.tokenizer();

  GenerateResult result;
  result.n_prompt = int(n_prompt);
  result.budget = budget == kNoBudget ? 0 : budget;
  std::vector<int32_t> history = request.prompt;
  history.insert(history.end(), request.appended.begin(), request.appended.end());
  history.reserve(history.size() + request.n_predict);

  auto start = Clock::now();
  const float* logits = session.prefill(request.prompt);
  const PagedKvCache& kv = session.kv();
  result.kept_tokens = double(kv.total_tokens()) / (kv.n_layers() * kv.n_kv_heads());
  result.token_cost = session.token_cost();
  result.kv_layers = kv_layers_json(kv);
  if (!request.appended.empty()) logits = session.extend(request.appended);
  result.prefill_ms = ms_since(start);
  result.score_ms = session.score_ms();
  result.kv_bytes_prefill = kv.bytes_in_use();

  Answer answer = decode_answer(session, sampler, tokenizer, logits, history, request.n_predict, pieces_only(on_piece));
  result.tokens = std::move(answer.tokens);
  result.text = std::move(answer.text);
  result.stop_reason = answer.stop_reason;
  result.decode_steps = answer.decode_steps;
  result.decode_ms = answer.decode_ms;
  result.kv_bytes_peak = kv.peak_bytes();
  result.kv_bytes_final = kv.bytes_in_use();
  return result;
}

}  // namespace kvslim
