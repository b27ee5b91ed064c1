// Where a sweep's samples come from and how an output is scored: the generated tasks of
// eval/task.h over a grid (the CLI's default), or any other source with the same shape (a fake
// generator in tests, a LongBench file).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "eval/sweep_config.h"
#include "eval/task.h"
#include "tokenizer/tokenizer.h"

namespace kvslim::eval {

struct Scores {
  double score = 0;    // in [0, 1]
  double partial = 0;  // passkey partial credit; = score elsewhere
};

struct SampleSource {
  std::vector<SampleSpec> samples;  // in the sweep's fixed order (shards split it by index)
  std::function<TaskSample(const SampleSpec&)> make;
  std::function<Scores(const TaskSample&, const std::string& output)> score;
};

// The generated tasks' interface (task.h), as values so that tests can put a fake in.
struct TaskCatalog {
  std::function<const TaskInfo&(const std::string&)> find;
  std::function<TaskSample(const std::string&, int64_t, uint64_t, const Tokenizer&, std::optional<double>)> make;
  std::function<double(const TaskSample&, const std::string&)> score, partial;
};

// task.h's registry, generators and scoring.
TaskCatalog generated_tasks();

// The grid (validated, see expand_grid) over `catalog`'s tasks, built with `tokenizer`, which
// must outlive the source. Sample i uses seed grid.seed + i; a requested depth is passed on.
SampleSource generated_source(const GridOptions& grid, const TaskCatalog& catalog, const Tokenizer& tokenizer);

}  // namespace kvslim::eval
