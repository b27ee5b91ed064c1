// What `kvslim eval` is asked (methods, budgets, grid or LongBench file, protocol, metrics, output)
// and the two steps that run it: prepare_eval() checks everything before a model is loaded,
// run_eval() runs the sweep. The command line and the Python package (kvslim.eval) both go
// through here, so the same request gives the same records.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "eval/sample_source.h"
#include "eval/sweep.h"

namespace kvslim::eval {

struct EvalRequest {
  std::string methods;  // comma-separated, options as NAME:key=value,key=value (parse_methods)
  std::vector<int64_t> budgets;
  GridOptions grid;
  std::string protocol = "query-aware";
  std::vector<std::string> metrics{"score"};
  std::string out = "eval-out";
  std::string shard = "0/1";
  std::string data;  // a LongBench-format JSONL instead of generated tasks
  int response_tokens = 32;
  std::string continuation;
  int batch = 512;
  int kv_page = 32;
  DType cache_type_k = DType::F16, cache_type_v = DType::F16;
};

// A request checked and expanded; no model loaded yet.
struct PreparedEval {
  SweepOptions sweep;
  GridOptions grid;                       // the generated tasks' grid (checked)
  std::optional<SampleSource> longbench;  // set when the request reads a file instead
  std::string continuation;               // tokenized by run_eval, with the model
};

// Every check of the request (methods and their budgets, metrics against the protocol, shard,
// engine options, the grid or the file); throws kvslim::Error. Warnings about skipped file lines
// go to `warn`.
PreparedEval prepare_eval(const EvalRequest& request, const std::function<void(const std::string&)>& warn = {});

// Runs the sweep (records appended to sweep.out_dir/samples.jsonl as they finish, resumable).
SweepOutcome run_eval(const Model& model, ThreadPool& pool, const PreparedEval& prepared,
                      const std::function<void(const SweepProgress&)>& on_run = {});

}  // namespace kvslim::eval
