// LookaheadKV's training data (LookaheadKV §4.1, scaled to this project): prompts from the
// evaluation generators (every task of src/tasks/task.h whose minimum fits the drawn length, plus
// plain haystack text for the model to continue, as the paper's truncated pretraining documents),
// lengths drawn log-uniformly in [min_tokens, max_tokens], and the frozen model's own greedy
// response to each (full cache). Responses cost a generation each, so they are cached in a JSONL
// file tied to the model's fingerprint: a rerun with the same options generates nothing.
//
// Seeds: training prompt i uses generator seed 3,000,000 + 100,000 * seed + i, held-out prompt i
// 2,000,000 + 100,000 * seed + i; both are >= 1,000,000, so disjoint from the evaluation
// harness's held-out samples (seed S + i with small S) and from each other.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/model.h"
#include "util/thread_pool.h"

namespace kvslim {

struct ResponseDataOptions {
  int train_samples = 256;
  int heldout_samples = 32;
  int64_t min_tokens = 256, max_tokens = 2048;
  int max_response = 64;  // tokens generated at most (a task's own limit when lower)
  uint64_t seed = 1;
  std::string cache_path;                   // JSONL file of responses; empty: no cache
  void validate(const Model& model) const;  // throws naming the bad option
};

struct ResponseSample {
  std::string task;   // a task name, or "haystack"
  uint64_t seed = 0;  // the generator seed
  int64_t target_tokens = 0;
  int max_response = 0;                   // the requested limit (the task's own may be lower)
  std::vector<int32_t> prompt, response;  // response: greedy tokens before end-of-generation
};

// The training (heldout = false) or held-out prompts with their responses, from the cache where
// it has them (the cache gains the others). `progress(done, total)` follows the generation.
// Throws when the cache file belongs to another model or is malformed (naming the line).
std::vector<ResponseSample> response_samples(const Model& model, ThreadPool& pool, const ResponseDataOptions& options,
                                             bool heldout, const std::function<void(int, int)>& progress = {});

}  // namespace kvslim
