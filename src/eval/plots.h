// `kvslim plot`: the charts of a results set (samples.jsonl records).
//   {metric}_vs_budget_{task}_{length}.svg  score (and each intrinsic metric present) against the
//       budget, one line per method, `full` as a horizontal reference; NIAH depths are averaged;
//   niah_{task}_{method}_b{budget}.svg  the NIAH grid: score per depth (rows) and length
//       (columns), for single-needle tasks run with --depths;
//   memory_vs_score.svg  mean KV bytes after prefill against the mean score over every task, one
//       line per method through its budgets.
#pragma once

#include <string>
#include <vector>

#include "eval/results.h"

namespace kvslim::eval {

struct PlotFile {
  std::string name;  // file name, [A-Za-z0-9._-] only
  std::string svg;
};

// Throws kvslim::Error when there are no records or they mix protocols.
std::vector<PlotFile> make_plots(const std::vector<SampleRecord>& records);

// Makes the plots and writes them into `out_dir` (created if needed); returns the paths written.
std::vector<std::string> write_plots(const std::vector<SampleRecord>& records, const std::string& out_dir);

}  // namespace kvslim::eval
