#include "bench/bench.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "util/error.h"

namespace kvslim {

void BenchOptions::validate() const {
  if (reps < 1) fail("--reps must be >= 1 (got {})", reps);
  if (decode_tokens < 1) fail("--decode-tokens must be >= 1 (got {})", decode_tokens);
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

}  // namespace

BenchReport run_bench(const Model& model, ThreadPool& pool, const BenchOptions& options) {
  options.validate();
  const int n_vocab = model.config().n_vocab;
  EngineOptions engine;
  engine.batch = options.batch;
  BenchReport report;

  for (int length : options.prompt_lengths) {
    const auto prompt = random_tokens(length, n_vocab, options.seed + length);
    engine.context = length;
    std::vector<double> ms, rate;
    uint64_t kv_bytes = 0;
    for (int rep = 0; rep < options.reps; ++rep) {
      Session session(model, pool, engine, length);
      const auto start = Clock::now();
      session.prefill(prompt);
      ms.push_back(ms_between(start, Clock::now()));
      rate.push_back(length * 1000.0 / ms.back());
      kv_bytes = session.cache().bytes_in_use();
    }
    report.prefill.push_back({length, Summary::of(rate), Summary::of(ms), kv_bytes});
  }

  for (int context : options.context_lengths) {
    const int steps = options.reps * options.decode_tokens;
    engine.context = context + steps;
    const auto tokens = random_tokens(context + steps, n_vocab, options.seed + 7 * context);
    Session session(model, pool, engine, context + steps);
    session.prefill(std::vector<int32_t>(tokens.begin(), tokens.begin() + context));
    std::vector<double> ms, rate;
    for (int rep = 0; rep < options.reps; ++rep) {
      const auto start = Clock::now();
      for (int i = 0; i < options.decode_tokens; ++i) session.decode(tokens[session.n_past()]);
      const double elapsed = ms_between(start, Clock::now());
      ms.push_back(elapsed / options.decode_tokens);
      rate.push_back(options.decode_tokens * 1000.0 / elapsed);
    }
    report.decode.push_back({context, Summary::of(rate), Summary::of(ms), session.cache().bytes_in_use()});
  }
  return report;
}

}  // namespace kvslim
