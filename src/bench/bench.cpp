#include "bench/bench.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "engine/sampler.h"
#include "press/registry.h"
#include "util/error.h"
#include "util/op_profile.h"

namespace kvslim {

void BenchOptions::validate() const {
  if (reps < 1) fail("--reps must be >= 1 (got {})", reps);
  if (decode_tokens < 1) fail("--decode-tokens must be >= 1 (got {})", decode_tokens);
  compression.validate();
  for (int n : prompt_lengths)
    if (n < 1) fail("prompt lengths must be >= 1 (got {})", n);
  for (int n : context_lengths)
    if (n < 1) fail("context lengths must be >= 1 (got {})", n);
}

Summary Summary::of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  const double median = n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
  return {median, values.front(), values.back()};
}

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

std::vector<int32_t> random_tokens(int n, int n_vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> tokens(n);
  for (auto& t : tokens) t = int32_t(rng() % uint64_t(n_vocab));
  return tokens;
}

// Starts timing the ops (op_profile.h) when asked to.
void start_profile(bool on) {
  if (!on) return;
  OpProfile::reset();
  OpProfile::set_enabled(true);
}

// The ops timed since start_profile, per unit (a prompt, or a decoded token).
std::vector<OpTime> finish_profile(bool on, double units) {
  std::vector<OpTime> ops;
  if (!on) return ops;
  OpProfile::set_enabled(false);
  for (int op = 0; op < int(ProfOp::kCount); ++op) {
    const auto o = ProfOp(op);
    if (OpProfile::count(o) == 0) continue;
    ops.push_back({std::string(prof_op_name(o)), OpProfile::total_ns(o) / 1e6 / units, OpProfile::count(o) / units});
  }
  return ops;
}

}  // namespace

BenchReport run_bench(const Model& model, ThreadPool& pool, const BenchOptions& options) {
  options.validate();
  options.compression.prepare();  // every error of the method before any work
  const int n_vocab = model.config().n_vocab;
  EngineOptions engine = options.engine;
  engine.batch = options.batch;
  BenchReport report;

  for (int length : options.prompt_lengths) {
    const auto prompt = random_tokens(length, n_vocab, options.seed + length);
    engine.context = length;
    std::vector<double> ms, rate, score_ms;
    BenchPoint point;
    start_profile(options.profile);
    for (int rep = 0; rep < options.reps; ++rep) {
      const PreparedCompression compression = options.compression.prepare();  // a fresh press per run
      Session session(model, pool,
                      {.engine = engine,
                       .capacity = length,
                       .press = compression.press.get(),
                       .budget = compression.budget_for(length)});
      const auto start = Clock::now();
      session.prefill(prompt);
      ms.push_back(ms_between(start, Clock::now()));
      rate.push_back(length * 1000.0 / ms.back());
      score_ms.push_back(session.score_ms());
      point.kv_bytes = session.kv().bytes_in_use();
      point.kv_bytes_peak = session.kv().peak_bytes();
      point.token_cost = session.token_cost();
    }
    point.profile = finish_profile(options.profile, options.reps);
    point.length = length;
    point.tokens_per_s = Summary::of(rate);
    point.ms = Summary::of(ms);
    point.score_ms = Summary::of(score_ms);
    report.prefill.push_back(point);
  }

  for (int context : options.context_lengths) {
    const int steps = options.reps * options.decode_tokens;
    engine.context = context + steps;
    const auto tokens = random_tokens(context + steps, n_vocab, options.seed + 7 * context);
    const PreparedCompression compression = options.compression.prepare();
    Session session(model, pool,
                    {.engine = engine,
                     .capacity = context + steps,
                     .press = compression.press.get(),
                     .budget = compression.budget_for(context),
                     .n_predict = steps,
                     .seed = options.seed});
    session.prefill(std::vector<int32_t>(tokens.begin(), tokens.begin() + context));
    const std::optional<TokenCost> cost = session.token_cost();
    std::vector<double> ms, rate;
    Sampler sampler(SamplerParams{}, n_vocab);
    const std::vector<int32_t> no_history;
    start_profile(options.profile);
    for (int rep = 0; rep < options.reps; ++rep) {
      const auto start = Clock::now();
      for (int i = 0; i < options.decode_tokens; ++i) {
        const float* logits = session.decode(tokens[session.n_past()]);
        if (options.profile) {
          ProfileScope prof(ProfOp::Sampling);
          sampler.sample(logits, no_history);
        }
      }
      const double elapsed = ms_between(start, Clock::now());
      ms.push_back(elapsed / options.decode_tokens);
      rate.push_back(options.decode_tokens * 1000.0 / elapsed);
    }
    BenchPoint point;
    point.profile = finish_profile(options.profile, double(options.reps) * options.decode_tokens);
    point.length = context;
    point.tokens_per_s = Summary::of(rate);
    point.ms = Summary::of(ms);
    point.kv_bytes = session.kv().bytes_in_use();
    point.kv_bytes_peak = session.kv().peak_bytes();
    point.token_cost = cost;
    report.decode.push_back(point);
  }
  return report;
}

}  // namespace kvslim
