// Internal to src/eval: the builders behind make_sample, one per task family. make_sample has
// validated the request (task, length, depth) before calling them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tasks/rng.h"
#include "tasks/task.h"

namespace kvslim::tasks {

struct SampleRequest {
  const TaskInfo& info;
  int64_t target_tokens;
  const Tokenizer& tokenizer;
  std::optional<double> depth;  // only for tasks that take one
  Rng& rng;                     // seeded from (task, length, seed)
};

enum class HaystackKind { Noise, Varied, Needles };

// RULER's niah.py arguments.
struct NiahSpec {
  HaystackKind haystack;
  bool uuid_keys;    // else "adjective-noun" words
  bool uuid_values;  // else 7-digit numbers
  int keys;          // needles with distinct keys (the first queries ones are asked)
  int values;        // needles per key
  int queries;       // keys asked at once
};

TaskSample make_niah(const NiahSpec& spec, const SampleRequest& request);
TaskSample make_passkey(int digits, const SampleRequest& request);
TaskSample make_variable_tracking(const SampleRequest& request);
TaskSample make_common_words(const SampleRequest& request);
TaskSample make_frequent_words(const SampleRequest& request);

}  // namespace kvslim::tasks
