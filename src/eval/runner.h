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
  PreparedSample(const SampleSpec& spec, TaskSample sample, const Tokenizer& tokenizer, Protocol protocol);
  const SampleSpec& spec() const { return spec_; }
  const TaskSample& sample() const { return sample_; }
  const PromptTokens& tokens() const { return tokens_; }
  const FullReference& reference(const Model& model, ThreadPool& pool, const RunnerOptions& options);

 private:
  SampleSpec spec_;
  TaskSample sample_;
  PromptTokens tokens_;
  std::optional<FullReference> reference_;
};

SampleRecord run_method(const Model& model, ThreadPool& pool, const RunnerOptions& options, PreparedSample& sample,
                        const MethodRun& run, const SampleSource& source);

}  // namespace kvslim::eval
