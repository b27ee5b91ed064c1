#include "eval/summary.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include "util/error.h"

namespace kvslim::eval {

namespace {

// `full` sorts before every other method.
struct GroupKey {
  std::string task;
  int64_t length;
  std::string method;
  int64_t budget;
  bool operator<(const GroupKey& o) const {
    return std::make_tuple(task, length, method != "full", method, budget) <
           std::make_tuple(o.task, o.length, o.method != "full", o.method, o.budget);
  }
};

// Mean of the values the records have; empty when none has one.
std::optional<double> mean_of(const std::vector<const SampleRecord*>& group,
                              std::optional<double> SampleRecord::*field) {
  double sum = 0;
  int n = 0;
  for (const SampleRecord* r : group)
    if (r->*field) {
      sum += *(r->*field);
      ++n;
    }
  if (n == 0) return std::nullopt;
  return sum / n;
}

struct Column {
  std::string name;
  std::string (*format)(const SummaryRow&);
};

std::string fixed(double v, int digits) { return fmt::format("{:.{}f}", v, digits); }
std::string general(const std::optional<double>& v) { return v ? fmt::format("{:.6g}", *v) : ""; }

std::vector<Column> columns(const Summary& s) {
  std::vector<Column> c = {
      {"method", [](const SummaryRow& r) { return r.method; }},
      {"budget", [](const SummaryRow& r) { return std::to_string(r.budget); }},
      {"task", [](const SummaryRow& r) { return r.task; }},
      {"length", [](const SummaryRow& r) { return std::to_string(r.length); }},
      {"samples", [](const SummaryRow& r) { return std::to_string(r.samples); }},
      {"score", [](const SummaryRow& r) { return fixed(r.score, 4); }},
      {"kv_bytes", [](const SummaryRow& r) { return fixed(r.kv_bytes, 0); }},
      {"prefill_ms", [](const SummaryRow& r) { return fixed(r.prefill_ms, 2); }},
      {"score_ms", [](const SummaryRow& r) { return fixed(r.score_ms, 2); }},
      {"decode_ms", [](const SummaryRow& r) { return fixed(r.decode_ms, 2); }},
  };
  if (s.has_token_cost) {
    c.push_back({"storage_tokens", [](const SummaryRow& r) { return general(r.storage_tokens); }});
    c.push_back({"traffic_tokens", [](const SummaryRow& r) { return general(r.traffic_tokens); }});
  }
  if (s.has_recall) c.push_back({"recall", [](const SummaryRow& r) { return general(r.recall); }});
  if (s.has_attn_error) c.push_back({"attn_error", [](const SummaryRow& r) { return general(r.attn_error); }});
  if (s.has_kl) c.push_back({"kl", [](const SummaryRow& r) { return general(r.kl); }});
  if (s.has_ppl_ratio) c.push_back({"ppl_ratio", [](const SummaryRow& r) { return general(r.ppl_ratio); }});
  return c;
}

// RFC 4180: a field with a comma, quote or line break is quoted, quotes doubled.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string markdown_cell(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) fail("cannot write {}", path.string());
}

}  // namespace

Summary summarize(const std::vector<SampleRecord>& records) {
  Summary s;
  std::map<GroupKey, std::vector<const SampleRecord*>> groups;
  for (const SampleRecord& r : records) {
    if (s.protocol.empty()) s.protocol = r.protocol;
    if (r.protocol != s.protocol)
      fail("the results mix the protocols {} and {}; keep one output directory per protocol", s.protocol, r.protocol);
    groups[{r.task, r.length, r.method, r.budget}].push_back(&r);
  }
  for (auto& [key, group] : groups) {
    // Sum in a fixed order (depth, seed), whatever order the records came in.
    std::sort(group.begin(), group.end(), [](const SampleRecord* a, const SampleRecord* b) {
      return std::tie(a->depth, a->seed) < std::tie(b->depth, b->seed);
    });
    SummaryRow row;
    row.method = key.method;
    row.budget = key.budget;
    row.task = key.task;
    row.length = key.length;
    row.samples = int64_t(group.size());
    for (const SampleRecord* r : group) {
      row.score += r->score;
      row.kv_bytes += double(r->kv_bytes);
      row.prefill_ms += r->prefill_ms;
      row.score_ms += r->score_ms;
      row.decode_ms += r->decode_ms;
    }
    const double n = double(group.size());
    row.score /= n;
    row.kv_bytes /= n;
    row.prefill_ms /= n;
    row.score_ms /= n;
    row.decode_ms /= n;
    row.recall = mean_of(group, &SampleRecord::recall);
    row.attn_error = mean_of(group, &SampleRecord::attn_error);
    row.kl = mean_of(group, &SampleRecord::kl);
    row.ppl_ratio = mean_of(group, &SampleRecord::ppl_ratio);
    row.storage_tokens = mean_of(group, &SampleRecord::storage_tokens);
    row.traffic_tokens = mean_of(group, &SampleRecord::traffic_tokens);
    s.has_token_cost |= row.storage_tokens.has_value();
    s.has_recall |= row.recall.has_value();
    s.has_attn_error |= row.attn_error.has_value();
    s.has_kl |= row.kl.has_value();
    s.has_ppl_ratio |= row.ppl_ratio.has_value();
    s.rows.push_back(std::move(row));
  }
  return s;
}

std::string summary_csv(const Summary& summary) {
  const std::vector<Column> cols = columns(summary);
  std::vector<std::string> names;
  for (const Column& c : cols) names.push_back(c.name);
  std::string out = fmt::format("{}\n", fmt::join(names, ","));
  for (const SummaryRow& row : summary.rows) {
    std::vector<std::string> fields;
    for (const Column& c : cols) fields.push_back(csv_field(c.format(row)));
    out += fmt::format("{}\n", fmt::join(fields, ","));
  }
  return out;
}

std::string summary_markdown(const Summary& summary) {
  const std::vector<Column> cols = columns(summary);
  std::string out = "|", rule = "|";
  for (const Column& c : cols) {
    out += fmt::format(" {} |", c.name);
    rule += c.name == "method" || c.name == "task" ? "---|" : "---:|";
  }
  out += fmt::format("\n{}\n", rule);
  for (const SummaryRow& row : summary.rows) {
    out += "|";
    for (const Column& c : cols) out += fmt::format(" {} |", markdown_cell(c.format(row)));
    out += "\n";
  }
  return out;
}

void write_summary(const Summary& summary, const std::string& dir) {
  write_file(std::filesystem::path(dir) / "summary.csv", summary_csv(summary));
  write_file(std::filesystem::path(dir) / "summary.md", summary_markdown(summary));
}

}  // namespace kvslim::eval
