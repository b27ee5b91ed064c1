// Synthetic long-context tasks (RULER suite, passkey retrieval, the NIAH grid): deterministic
// generators sized in tokens of the model at hand, and their scoring.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace kvslim::tasks {

// One generated sample. The prompt is context + question + answer_prefix; the query-aware
// protocol compresses all of it, the query-agnostic one compresses `context` only and appends
// question + answer_prefix uncompressed.
// One question of a multi-turn sample (eval --protocol multi-turn): asked after the context
// and the earlier turns' questions and answers.
struct TaskTurn {
  std::string question, answer_prefix;
  std::vector<std::string> answers;
  int max_new_tokens = 32;
};

struct TaskSample {
  std::string task;           // registry name, e.g. "niah_single_1"
  int64_t target_tokens = 0;  // requested prompt length (tokens of the model's tokenizer)
  uint64_t seed = 0;
  std::string context;               // haystack with the needles: the part every protocol compresses
  std::string question;              // the query, asked after the context
  std::string answer_prefix;         // text that opens the answer (may be empty)
  std::vector<std::string> answers;  // strings the output must contain
  double depth = -1;                 // needle depth in [0, 1] for single-needle tasks, else -1
  int max_new_tokens = 32;           // tokens to generate for this task
  // Tasks whose question asks about several needles (niah_multiquery) also ask them one per turn.
  std::vector<TaskTurn> turns;

  std::string prompt() const { return context + question + answer_prefix; }
};

struct TaskInfo {
  std::string name;
  std::string description;
  int64_t min_tokens;  // shortest prompt the task can be built at
  bool takes_depth;    // single-needle tasks place their needle at a requested depth
};

// Every task, in a fixed order. Names: niah_single_1/2/3, niah_multikey_1/2/3, niah_multivalue,
// niah_multiquery, vt, cwe, fwe, passkey, passkey64.
const std::vector<TaskInfo>& task_registry();
const TaskInfo& find_task(const std::string& name);  // throws kvslim::Error listing the valid names

// Builds a sample whose prompt (with BOS when the tokenizer adds one) is target_tokens long,
// within 1%. `depth` (in [0, 1]) places the needle of a single-needle task; without it the depth
// is drawn from the seed. Throws kvslim::Error for an unknown task, a target below the task's
// minimum, or a depth outside [0, 1] / given to a task that takes none.
TaskSample make_sample(const std::string& task, int64_t target_tokens, uint64_t seed, const Tokenizer& tokenizer,
                       std::optional<double> depth = std::nullopt);

// RULER's score: the fraction of `answers` found in the output (case-insensitive), in [0, 1].
double score_output(const TaskSample& sample, const std::string& output);
// Passkey tasks also get partial credit: the fraction of the key's digits the output's first
// digit run reproduces in place. Other tasks: the same as score_output.
double partial_score(const TaskSample& sample, const std::string& output);

}  // namespace kvslim::tasks
