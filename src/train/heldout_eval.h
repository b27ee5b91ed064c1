// Held-out evaluation during training: greedy generation through the inference engine (full
// KV cache) on an exported model, for generator seeds 0 .. samples-1 (all below the training
// seeds, see data_stream.h), scored with the task's own score_output.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model.h"
#include "util/thread_pool.h"

namespace kvslim::train {

struct EvalSpec {
  std::vector<std::string> tasks = {"niah_single_1", "niah_single_2", "passkey"};
  std::vector<int64_t> lengths = {1024, 2048};
  int samples = 10;  // per (task, length)
};

struct EvalScore {
  std::string task;
  int64_t length = 0;
  double score = 0;  // mean score_output over the samples, in [0, 1]
  int samples = 0;
};

// Throws for an unknown task or a length below a task's minimum.
std::vector<EvalScore> evaluate_heldout(const Model& model, const EvalSpec& spec, ThreadPool& pool);

}  // namespace kvslim::train
