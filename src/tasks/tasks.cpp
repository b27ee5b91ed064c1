// The task registry and make_sample: validation, the per-sample seed, and the builder of each task.
#include <functional>

#include "tasks/task.h"
#include "tasks/task_families.h"
#include "util/error.h"

namespace kvslim::tasks {
namespace {

struct TaskEntry {
  TaskInfo info;
  std::function<TaskSample(const SampleRequest&)> build;
};

std::function<TaskSample(const SampleRequest&)> niah(NiahSpec spec) {
  return [spec](const SampleRequest& request) { return make_niah(spec, request); };
}

// min_tokens: the fixed text of the longest variant plus a little haystack, counted as one token
// per byte, the most any tokenizer needs for our ASCII text, so each task can be built at its
// minimum whatever the tokenizer.
const std::vector<TaskEntry>& entries() {
  using H = HaystackKind;
  static const std::vector<TaskEntry> list = {
      {{"niah_single_1", "one needle (word key, 7-digit number) in the repeated noise haystack", 512, true},
       niah({H::Noise, false, false, 1, 1, 1})},
      {{"niah_single_2", "one needle (word key, 7-digit number) in varied sentences", 512, true},
       niah({H::Varied, false, false, 1, 1, 1})},
      {{"niah_single_3", "one needle (word key, UUID) in varied sentences", 512, true},
       niah({H::Varied, false, true, 1, 1, 1})},
      {{"niah_multikey_1", "the asked needle among 3 others with other keys, in varied sentences", 768, false},
       niah({H::Varied, false, false, 4, 1, 1})},
      {{"niah_multikey_2", "the asked needle in a haystack made of needles with distinct word keys", 512, false},
       niah({H::Needles, false, false, 1, 1, 1})},
      {{"niah_multikey_3", "the asked needle in a haystack of needles with UUID keys and values", 512, false},
       niah({H::Needles, true, true, 1, 1, 1})},
      {{"niah_multivalue", "4 needles with the same key, in varied sentences; all 4 values expected", 768, false},
       niah({H::Varied, false, false, 1, 4, 1})},
      {{"niah_multiquery", "4 needles with distinct keys, all asked at once; all 4 values expected", 768, false},
       niah({H::Varied, false, false, 4, 1, 4})},
      {{"vt", "variable tracking: a chain of 4 assignments in the noise haystack; all 5 names expected", 512, false},
       make_variable_tracking},
      {{"cwe", "common words extraction: the 10 most frequent words of a numbered list", 1280, false},
       make_common_words},
      {{"fwe", "frequent words extraction: the 3 most frequent coded words of a Zipf (alpha 2) text", 768, false},
       make_frequent_words},
      {{"passkey", "a 5-digit pass key in the noise haystack", 256, true},
       [](const SampleRequest& r) { return make_passkey(5, r); }},
      {{"passkey64", "a 64-digit pass key in the noise haystack", 512, true},
       [](const SampleRequest& r) { return make_passkey(64, r); }},
  };
  return list;
}

const TaskEntry& find_entry(const std::string& name) {
  std::string names;
  for (const TaskEntry& entry : entries()) {
    if (entry.info.name == name) return entry;
    names += (names.empty() ? "" : ", ") + entry.info.name;
  }
  fail("unknown task '{}' (valid: {})", name, names);
}

}  // namespace

const std::vector<TaskInfo>& task_registry() {
  static const std::vector<TaskInfo> infos = [] {
    std::vector<TaskInfo> out;
    for (const TaskEntry& entry : entries()) out.push_back(entry.info);
    return out;
  }();
  return infos;
}

const TaskInfo& find_task(const std::string& name) { return find_entry(name).info; }

TaskSample make_sample(const std::string& task, int64_t target_tokens, uint64_t seed, const Tokenizer& tokenizer,
                       std::optional<double> depth) {
  const TaskEntry& entry = find_entry(task);
  if (target_tokens < entry.info.min_tokens) {
    fail("{}: a prompt of {} tokens is too short; the task needs at least {}", task, target_tokens,
         entry.info.min_tokens);
  }
  if (depth) {
    if (!entry.info.takes_depth) fail("{}: the task takes no depth (it places its needles itself)", task);
    if (!(*depth >= 0.0 && *depth <= 1.0)) fail("{}: depth {} is outside [0, 1]", task, *depth);
  }
  Rng rng(sample_seed(task, target_tokens, seed));
  TaskSample sample = entry.build({entry.info, target_tokens, tokenizer, depth, rng});
  sample.task = task;
  sample.target_tokens = target_tokens;
  sample.seed = seed;
  return sample;
}

}  // namespace kvslim::tasks
