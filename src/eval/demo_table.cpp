#include "eval/demo_table.h"

#include <fmt/format.h>

#include <algorithm>

namespace kvslim::eval {

namespace {

struct Totals {
  DemoRow row;
  double score_sum = 0, kv_sum = 0, prompt_tokens = 0, prefill_ms = 0, decode_steps = 0, decode_ms = 0;
};

}  // namespace

std::vector<DemoRow> demo_rows(const std::vector<SampleRecord>& records) {
  std::vector<Totals> totals;
  for (const SampleRecord& r : records) {
    auto it = std::find_if(totals.begin(), totals.end(),
                           [&](const Totals& t) { return t.row.method == r.method && t.row.budget == r.budget; });
    if (it == totals.end()) {
      totals.push_back({});
      it = totals.end() - 1;
      it->row.method = r.method;
      it->row.budget = r.budget;
    }
    ++it->row.runs;
    it->score_sum += r.score;
    it->kv_sum += double(r.kv_bytes);
    it->prompt_tokens += double(r.n_prompt);
    it->prefill_ms += r.prefill_ms;
    it->decode_steps += double(r.decode_steps);
    it->decode_ms += r.decode_ms;
  }
  std::stable_partition(totals.begin(), totals.end(), [](const Totals& t) { return t.row.method == "full"; });
  std::vector<DemoRow> rows;
  for (Totals& t : totals) {
    DemoRow row = t.row;
    row.score = t.score_sum / double(row.runs);
    row.kv_bytes = t.kv_sum / double(row.runs);
    row.prefill_tok_s = t.prefill_ms > 0 ? t.prompt_tokens * 1000.0 / t.prefill_ms : 0;
    row.decode_tok_s = t.decode_ms > 0 ? t.decode_steps * 1000.0 / t.decode_ms : 0;
    rows.push_back(row);
  }
  return rows;
}

std::string demo_markdown(const std::vector<DemoRow>& rows) {
  double full_kv = 0;
  for (const DemoRow& r : rows)
    if (r.method == "full") full_kv = r.kv_bytes;
  std::string out =
      "| method | budget | runs | score | KV MiB | KV vs full | prefill tok/s | decode tok/s |\n"
      "|---|---|---|---|---|---|---|---|\n";
  for (const DemoRow& r : rows) {
    const std::string share = full_kv > 0 ? fmt::format("{:.0f}%", 100.0 * r.kv_bytes / full_kv) : "-";
    out += fmt::format("| {} | {} | {} | {:.3f} | {:.2f} | {} | {:.0f} | {:.1f} |\n", r.method,
                       r.budget > 0 ? std::to_string(r.budget) : "-", r.runs, r.score, r.kv_bytes / (1024.0 * 1024.0),
                       share, r.prefill_tok_s, r.decode_tok_s);
  }
  return out;
}

}  // namespace kvslim::eval
