// Where a sweep's samples come from and how an output is scored: the generated tasks of
// tasks/task.h over a grid (the CLI's default), a LongBench file (--data), or any other source with
// the same shape (a fake generator in tests).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "eval/longbench.h"
#include "eval/sweep_config.h"
#include "tasks/task.h"
#include "tokenizer/tokenizer.h"

namespace kvslim::eval {

struct Scores {
  double score = 0;    // in [0, 1]
  double partial = 0;  // passkey partial credit; = score elsewhere
};

struct SampleSource {
  std::vector<SampleSpec> samples;  // in the sweep's fixed order (shards split it by index)
  std::function<tasks::TaskSample(const SampleSpec&)> make;
  std::function<Scores(const tasks::TaskSample&, const std::string& output)> score;
};

// The generated tasks' interface (task.h), as values so that tests can put a fake in.
struct TaskCatalog {
  std::function<const tasks::TaskInfo&(const std::string&)> find;
  std::function<tasks::TaskSample(const std::string&, int64_t, uint64_t, const Tokenizer&, std::optional<double>)> make;
  std::function<double(const tasks::TaskSample&, const std::string&)> score, partial;
};

// task.h's registry, generators and scoring.
TaskCatalog generated_tasks();

// The grid (validated, see expand_grid) over `catalog`'s tasks, built with `tokenizer`, which
// must outlive the source. Sample i uses seed grid.seed + i; a requested depth is passed on.
SampleSource generated_source(const GridOptions& grid, const TaskCatalog& catalog, const Tokenizer& tokenizer);

// LongBench samples in file order, each scored by its dataset's metric. The results' task is the
// dataset, the seed the sample's line number (its identity for resuming), and the length the
// LongBench-E bucket of its word count (0: under 4k words, 4000: 4k-8k, 8000: more), so that the
// summary has one row per dataset and bucket. The prompt is longbench_prompt's (the context is
// what query-agnostic compresses); generation stops at the dataset's max_new_tokens.
SampleSource longbench_source(std::vector<LongBenchSample> samples);

}  // namespace kvslim::eval
