// The grid of a sweep, parsed from the command line and expanded in a fixed order: which
// methods (with options), budgets and metrics, which samples, and which share of them a shard
// runs. Every check happens here, before any long work.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/compression.h"
#include "press/press.h"
#include "tasks/task.h"

namespace kvslim::eval {

// A method as --methods names it: NAME, NAME:ARG (the registry's argument, as adakv:tova) or
// NAME:key=value,key=value (its options).
struct MethodSpec {
  std::string label;                 // as written; the `method` of the results
  std::string press;                 // what make_press gets: NAME or NAME:ARG
  std::vector<std::string> options;  // key=value
  bool is_full() const { return press == "full"; }
  // The method at `budget` as every command gives it to the engine (CompressionOptions::prepare
  // builds it); make() is its press without a budget (the intrinsic metrics' fresh instances).
  CompressionOptions compression(std::optional<int64_t> budget) const;
  std::unique_ptr<Press> make() const;
};

// Commas separate methods, except that an item holding '=' continues the options of the method
// before it: "snapkv:window=16,kernel=5,h2o" is snapkv with two options, then h2o. Each method
// is built once to check its name (unknown ones list the valid names) and options.
std::vector<MethodSpec> parse_methods(const std::string& list);

// One (method, budget) of the grid; `full` runs once, with budget 0 (no limit).
struct MethodRun {
  const MethodSpec* method;
  int64_t budget;
};
// Every method at every budget, in the order given. Budgets must be > 0 and each method must
// accept each of them (Press::check_budget).
std::vector<MethodRun> expand_runs(const std::vector<MethodSpec>& methods, const std::vector<int64_t>& budgets);

// score always runs (it also gives the KV bytes and timings every row needs); the others are
// the intrinsic metrics (kl brings ppl_ratio along).
struct MetricSet {
  bool recall = false, attn_error = false, kl = false;
};
MetricSet parse_metrics(const std::vector<std::string>& names);  // score, recall, attn_error, kl

// `--shard i/n`: run the samples whose index in the grid is i mod n.
struct Shard {
  int index = 0, count = 1;
  bool takes(size_t sample_index) const { return int(sample_index % size_t(count)) == index; }
};
Shard parse_shard(const std::string& text);

// One prompt of the grid; every method and budget runs on it.
struct SampleSpec {
  std::string task;   // registry name (or LongBench dataset)
  std::string label;  // the results' task: the name, or TASK@DEPTH on the NIAH grid
  int64_t length = 0;
  double depth = -1;  // requested needle depth; -1: none (a single-needle task draws it from the seed)
  uint64_t seed = 0;
};

struct GridOptions {
  std::vector<std::string> tasks;
  std::vector<int64_t> lengths;
  std::vector<double> depths;  // the NIAH grid: single-needle tasks run once per depth
  int samples = 3;
  uint64_t seed = 0;  // sample i of a (task, length, depth) uses seed + i
};

// Tasks x lengths x depths (single-needle tasks only) x samples, in that nesting order. Throws
// for an empty list, an unknown task (via find_task), a length below a task's minimum, a depth
// outside [0, 1] or a repeated entry.
std::vector<SampleSpec> expand_grid(const GridOptions& grid,
                                    const std::function<const tasks::TaskInfo&(const std::string&)>& find_task);

}  // namespace kvslim::eval
