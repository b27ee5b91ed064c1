// A sweep: every (method, budget) of the grid on every sample of this shard, each run appended to
// OUT/samples.jsonl as it finishes; runs already in the file (same method, budget, task, length,
// depth, seed and protocol) are skipped, so re-running the same command resumes. The summary is
// rebuilt from the whole file at the end.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "eval/runner.h"
#include "eval/summary.h"

namespace kvslim::eval {

struct SweepOptions {
  std::vector<MethodSpec> methods;
  std::vector<int64_t> budgets;
  RunnerOptions runner;
  Shard shard;
  std::string out_dir = "eval-out";
};

struct SweepProgress {
  int64_t done = 0, total = 0;           // runs finished / to run in this invocation
  const SampleRecord* record = nullptr;  // the run just finished
};

struct SweepOutcome {
  int64_t ran = 0, skipped = 0;
  Summary summary;
};

// Checks the output directory can be written before running anything.
SweepOutcome run_sweep(const Model& model, ThreadPool& pool, const SampleSource& source, const SweepOptions& options,
                       const std::function<void(const SweepProgress&)>& on_run = {});

// Summarises a results directory (samples.jsonl) into its summary.csv and summary.md.
Summary summarize_directory(const std::string& dir);

// `kvslim eval-merge`: the records of out_dir (if any) and of every input directory, duplicates
// dropped (the first stays), written to out_dir/samples.jsonl with its summary. The summary
// equals that of one unsharded run over the same grid.
Summary merge_directories(const std::string& out_dir, const std::vector<std::string>& inputs);

}  // namespace kvslim::eval
