// The summary of a sweep: per (method, budget, task, length), the means over its samples, as
// summary.csv (columns method,budget,task,length,samples,score,kv_bytes,prefill_ms,score_ms,
// decode_ms, storage_tokens and traffic_tokens when any record has them, then one trailing column
// per intrinsic metric any record has) and summary.md (the
// same as a Markdown table). Rows and means do not depend on the order of the records, so a
// merged set of shards summarises exactly as one unsharded run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "eval/results.h"

namespace kvslim::eval {

struct SummaryRow {
  std::string method;
  int64_t budget = 0;
  std::string task;
  int64_t length = 0;
  int64_t samples = 0;
  double score = 0, kv_bytes = 0, prefill_ms = 0, score_ms = 0, decode_ms = 0;
  std::optional<double> recall, attn_error, kl, ppl_ratio;  // means over the samples that have them
  std::optional<double> storage_tokens, traffic_tokens;     // the same, per (layer, KV head)
};

struct Summary {
  std::string protocol;
  std::vector<SummaryRow> rows;  // by task, length, method (`full` first, then by name), budget
  bool has_recall = false, has_attn_error = false, has_kl = false, has_ppl_ratio = false;
  bool has_token_cost = false;
};

// Throws kvslim::Error when the records mix protocols (their rows would be averaged together).
Summary summarize(const std::vector<SampleRecord>& records);

std::string summary_csv(const Summary& summary);
std::string summary_markdown(const Summary& summary);

// Writes summary.csv and summary.md into `dir`.
void write_summary(const Summary& summary, const std::string& dir);

}  // namespace kvslim::eval
