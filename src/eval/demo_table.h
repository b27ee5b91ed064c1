// `kvslim demo`'s table: one row per (method, budget) of a results set, pooled over every task,
// length and sample: mean score, mean KV bytes after prefill, and prefill/decode throughput.
#pragma once

#include <string>
#include <vector>

#include "eval/results.h"

namespace kvslim::eval {

struct DemoRow {
  std::string method;
  int64_t budget = 0;  // 0: full cache
  int64_t runs = 0;
  double score = 0;          // mean over runs, in [0, 1]
  double kv_bytes = 0;       // mean KV bytes once the prompt is cached
  double prefill_tok_s = 0;  // prompt tokens over prefill time, pooled over runs
  double decode_tok_s = 0;   // decode steps over decode time, pooled over runs (0: none ran)
};

// Rows in first-appearance order of (method, budget), `full` first.
std::vector<DemoRow> demo_rows(const std::vector<SampleRecord>& records);

// The rows as a Markdown table (KV in MiB, with the share of the full cache's KV when present).
std::string demo_markdown(const std::vector<DemoRow>& rows);

}  // namespace kvslim::eval
