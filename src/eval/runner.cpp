#include "eval/runner.h"

#include <fmt/format.h>

#include "engine/generate.h"
#include "engine/live_session.h"
#include "util/error.h"

namespace kvslim::eval {

PreparedSample::PreparedSample(const SampleSpec& spec, tasks::TaskSample sample, const Tokenizer& tokenizer,
                               Protocol protocol)
    : spec_(spec), sample_(std::move(sample)), tokens_(tokenize_prompt(sample_, tokenizer, protocol)) {}

const FullReference& PreparedSample::reference(const Model& model, ThreadPool& pool, const RunnerOptions& options) {
  if (!reference_) reference_ = run_full_reference(model, pool, options.engine, tokens_, options.intrinsic);
  return *reference_;
}

SampleRecord run_method(const Model& model, ThreadPool& pool, const RunnerOptions& options, PreparedSample& prepared,
                        const MethodRun& run, const SampleSource& source) {
  const tasks::TaskSample& sample = prepared.sample();
  const MethodSpec& method = *run.method;
  const std::optional<int64_t> budget = run.budget > 0 ? std::optional<int64_t>(run.budget) : std::nullopt;

  GenerateRequest request;
  request.prompt = prepared.tokens().compressed;
  request.appended = prepared.tokens().appended;
  request.n_predict = sample.max_new_tokens;
  request.sampling.temperature = 0;              // greedy
  request.sampling.seed = prepared.spec().seed;  // the seed of seeded methods (random)
  request.compression = method.compression(budget);
  EngineOptions engine = options.engine;
  engine.context = int(prepared.tokens().size() + sample.max_new_tokens);
  const GenerateResult generated = generate(model, pool, engine, request);

  SampleRecord r;
  r.method = method.label;
  r.budget = run.budget;
  r.task = prepared.spec().label;
  r.length = prepared.spec().length;
  r.depth = prepared.spec().depth;
  r.seed = prepared.spec().seed;
  r.protocol = protocol_name(options.protocol);
  const Scores scores = source.score(sample, generated.text);
  r.score = scores.score;
  r.partial = scores.partial;
  r.n_prompt = prepared.tokens().size();
  r.kept_tokens = generated.kept_tokens;
  if (generated.token_cost)
    r.storage_tokens = generated.token_cost->storage, r.traffic_tokens = generated.token_cost->traffic;
  r.kv_bytes = generated.kv_bytes_prefill;
  r.kv_bytes_peak = generated.kv_bytes_peak;
  r.prefill_ms = generated.prefill_ms;
  r.score_ms = generated.score_ms;
  r.decode_ms = generated.decode_ms;
  r.decode_steps = generated.decode_steps;
  r.output = generated.text;

  if (options.intrinsic.any()) {
    const FullReference& ref = prepared.reference(model, pool, options);
    const IntrinsicResult m = measure_intrinsic(
        model, pool, options.engine, prepared.tokens(), ref, [&] { return method.make(); }, budget.value_or(kNoBudget),
        prepared.spec().seed, options.intrinsic);
    r.recall = m.recall;
    r.attn_error = m.attn_error;
    r.kl = m.kl;
    r.ppl_ratio = m.ppl_ratio;
  }
  return r;
}

std::string turn_label(const std::string& task, size_t turn) { return fmt::format("{}/turn{}", task, turn); }

std::vector<SampleRecord> run_multi_turn(const Model& model, ThreadPool& pool, const RunnerOptions& options,
                                         PreparedSample& prepared, const MethodRun& run, const SampleSource& source) {
  const tasks::TaskSample& sample = prepared.sample();
  if (sample.turns.empty()) fail("task '{}' has no multi-turn form (multi-turn tasks: niah_multiquery)", sample.task);
  const MethodSpec& method = *run.method;
  const Tokenizer& tokenizer = model.tokenizer();
  const CompressionOptions compression =
      method.compression(run.budget > 0 ? std::optional<int64_t>(run.budget) : std::nullopt);
  SamplerParams greedy;
  greedy.temperature = 0;
  greedy.seed = prepared.spec().seed;

  std::vector<std::vector<int32_t>> questions;
  int64_t total = int64_t(tokenizer.encode(sample.context, tokenizer.add_bos_by_default(), false).size());
  for (const tasks::TaskTurn& turn : sample.turns) {
    questions.push_back(tokenizer.encode(turn.question + turn.answer_prefix, false, false));
    total += int64_t(questions.back().size()) + turn.max_new_tokens + 1;
  }
  EngineOptions engine = options.engine;
  engine.context = int(total);
  LiveSession live(model, pool, engine, compression, greedy);

  std::vector<SampleRecord> records;
  std::vector<int32_t> conversation = tokenizer.encode(sample.context, tokenizer.add_bos_by_default(), false);
  for (size_t t = 0; t < sample.turns.size(); ++t) {
    const tasks::TaskTurn& turn = sample.turns[t];
    if (t > 0) conversation = live.transcript();
    conversation.insert(conversation.end(), questions[t].begin(), questions[t].end());
    live.prompt(conversation, turn.max_new_tokens);
    const Answer answer = live.answer(turn.max_new_tokens);
    const TurnStats& stats = live.last_turn();

    tasks::TaskSample asked = sample;  // scored against this turn's answers
    asked.question = turn.question;
    asked.answer_prefix = turn.answer_prefix;
    asked.answers = turn.answers;
    const Scores scores = source.score(asked, answer.text);
    SampleRecord r;
    r.method = method.label;
    r.budget = run.budget;
    r.task = turn_label(prepared.spec().label, t + 1);
    r.length = prepared.spec().length;
    r.depth = prepared.spec().depth;
    r.seed = prepared.spec().seed;
    r.protocol = protocol_name(options.protocol);
    r.score = scores.score;
    r.partial = scores.partial;
    r.n_prompt = int64_t(conversation.size());
    r.kept_tokens = stats.kept_tokens;
    r.kv_bytes = stats.kv_bytes;
    r.kv_bytes_peak = live.session()->kv().peak_bytes();
    r.prefill_ms = stats.prefill_ms;
    r.score_ms = stats.score_ms;
    r.decode_ms = stats.decode_ms;
    r.decode_steps = stats.decode_steps;
    r.output = answer.text;
    records.push_back(std::move(r));
  }
  return records;
}

}  // namespace kvslim::eval
