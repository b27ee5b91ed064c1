// One run of a sweep: a method at a budget on one sample. Greedy generation under the protocol,
// timed and scored, then the intrinsic metrics asked for, against the sample's full-cache
// reference.
#pragma once

#include <cstdint>
#include <optional>

#include "engine/session.h"
#include "eval/intrinsic.h"
#include "eval/protocol.h"
#include "eval/results.h"
#include "eval/sample_source.h"
#include "eval/sweep_config.h"

namespace kvslim::eval {

struct RunnerOptions {
  EngineOptions engine;  // --batch, --kv-page; the context is sized to each prompt
  Protocol protocol = Protocol::QueryAware;
  IntrinsicOptions intrinsic;
};

// A sample made ready to run: its text, tokens under the protocol, and (made on first use, then
// shared by every method) the full cache's reference for the intrinsic metrics.
class PreparedSample {
 public:
  PreparedSample(const SampleSpec& spec, tasks::TaskSample sample, const Tokenizer& tokenizer, Protocol protocol);
  const SampleSpec& spec() const { return spec_; }
  const tasks::TaskSample& sample() const { return sample_; }
  const PromptTokens& tokens() const { return tokens_; }
  const FullReference& reference(const Model& model, ThreadPool& pool, const RunnerOptions& options);

 private:
  SampleSpec spec_;
  tasks::TaskSample sample_;
  PromptTokens tokens_;
  std::optional<FullReference> reference_;
};

// The multi-turn protocol: one LiveSession per (method, budget, sample); the context plus the
// first turn's question is the first prompt, each later turn's question follows the previous
// answer. One record per turn, its task labelled TASK/turnN (summary rows per turn). Throws
// kvslim::Error for a sample without turns, naming the tasks that have them.
std::vector<SampleRecord> run_multi_turn(const Model& model, ThreadPool& pool, const RunnerOptions& options,
                                         PreparedSample& sample, const MethodRun& run, const SampleSource& source);
// "TASK/turnN": the task label of turn n (1-based) of a multi-turn run.
std::string turn_label(const std::string& task, size_t turn);

SampleRecord run_method(const Model& model, ThreadPool& pool, const RunnerOptions& options, PreparedSample& sample,
                        const MethodRun& run, const SampleSource& source);

}  // namespace kvslim::eval
