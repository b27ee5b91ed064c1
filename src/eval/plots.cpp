#include "eval/plots.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "eval/summary.h"
#include "eval/svg_plot.h"
#include "util/error.h"

namespace kvslim::eval {

namespace {

std::string base_task(const std::string& label) { return label.substr(0, label.find('@')); }

std::string file_part(const std::string& text) {
  std::string out;
  for (char c : text) out += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ? c : '_';
  return out;
}

struct Metric {
  const char* name;
  const char* axis;
  std::optional<double> (*value)(const SummaryRow&);
  bool unit_range;  // [0, 1]
};

const Metric kMetrics[] = {
    {"score", "score", [](const SummaryRow& r) { return std::optional<double>(r.score); }, true},
    {"recall", "recall@B", [](const SummaryRow& r) { return r.recall; }, true},
    {"attn_error", "attention-output relative L2 error", [](const SummaryRow& r) { return r.attn_error; }, false},
    {"kl", "KL(full || compressed)", [](const SummaryRow& r) { return r.kl; }, false},
    {"ppl_ratio", "perplexity ratio (compressed / full)", [](const SummaryRow& r) { return r.ppl_ratio; }, false},
};

// One chart per (task, length) and metric present: the metric against the budget.
void metric_charts(const std::vector<SampleRecord>& records, std::vector<PlotFile>& files) {
  std::vector<SampleRecord> by_task = records;
  for (SampleRecord& r : by_task) r.task = base_task(r.task);  // NIAH depths averaged
  const Summary summary = summarize(by_task);
  std::map<std::pair<std::string, int64_t>, std::vector<const SummaryRow*>> charts;
  for (const SummaryRow& row : summary.rows) charts[{row.task, row.length}].push_back(&row);
  for (const Metric& metric : kMetrics)
    for (const auto& [key, rows] : charts) {
      LineChart chart;
      chart.title =
          fmt::format("{} vs budget: {}, {} tokens ({})", metric.name, key.first, key.second, summary.protocol);
      chart.x_label = "budget (tokens per layer and KV head)";
      chart.y_label = metric.axis;
      if (metric.unit_range) chart.y_range = {0.0, 1.0};
      std::map<std::string, ChartSeries> series;  // by method, points by ascending budget (rows are sorted)
      std::vector<std::string> order;
      for (const SummaryRow* row : rows) {
        const std::optional<double> v = metric.value(*row);
        if (!v) continue;
        if (row->method == "full") {
          chart.references.push_back({row->method, *v});
          continue;
        }
        if (!series.count(row->method)) order.push_back(row->method);
        series[row->method].name = row->method;
        series[row->method].points.emplace_back(double(row->budget), *v);
      }
      if (series.empty() && chart.references.empty()) continue;
      for (const std::string& m : order) chart.series.push_back(series[m]);
      double lo = 0, hi = 0;
      for (const ChartSeries& s : chart.series)
        for (const auto& p : s.points) {
          lo = lo == 0 ? p.first : std::min(lo, p.first);
          hi = std::max(hi, p.first);
        }
      chart.log2_x = lo > 0 && hi / lo >= 4;
      files.push_back({fmt::format("{}_vs_budget_{}_{}.svg", metric.name, file_part(key.first), key.second),
                       render_line_chart(chart)});
    }
}

// The NIAH grid: per (task, method, budget), the mean score per (depth, length).
void niah_heatmaps(const std::vector<SampleRecord>& records, std::vector<PlotFile>& files) {
  using Cell = std::pair<double, int>;  // sum, count
  std::map<std::tuple<std::string, std::string, int64_t>, std::map<std::pair<double, int64_t>, Cell>> maps;
  for (const SampleRecord& r : records)
    if (r.depth >= 0) {
      Cell& cell = maps[{base_task(r.task), r.method, r.budget}][{r.depth, r.length}];
      cell.first += r.score;
      ++cell.second;
    }
  for (const auto& [key, cells] : maps) {
    const auto& [task, method, budget] = key;
    std::set<double> depths;
    std::set<int64_t> lengths;
    for (const auto& [at, cell] : cells) {
      depths.insert(at.first);
      lengths.insert(at.second);
    }
    Heatmap map;
    map.title =
        budget > 0 ? fmt::format("{}: {} at budget {}", task, method, budget) : fmt::format("{}: {}", task, method);
    map.x_label = "prompt length (tokens)";
    map.y_label = "needle depth";
    for (int64_t l : lengths) map.columns.push_back(std::to_string(l));
    for (double d : depths) {
      map.rows.push_back(fmt::format("{}", d));
      std::vector<std::optional<double>> row;
      for (int64_t l : lengths) {
        const auto it = cells.find({d, l});
        row.push_back(it == cells.end() ? std::nullopt : std::optional<double>(it->second.first / it->second.second));
      }
      map.values.push_back(std::move(row));
    }
    files.push_back(
        {fmt::format("niah_{}_{}_b{}.svg", file_part(task), file_part(method), budget), render_heatmap(map)});
  }
}

// Mean KV bytes against mean score per (method, budget), over every task and length.
void memory_chart(const std::vector<SampleRecord>& records, std::vector<PlotFile>& files) {
  std::vector<SampleRecord> pooled = records;
  for (SampleRecord& r : pooled) {
    r.task = "all";
    r.length = 0;
  }
  const Summary summary = summarize(pooled);
  double most = 0;
  for (const SummaryRow& row : summary.rows) most = std::max(most, row.kv_bytes);
  const bool mib = most >= 1024.0 * 1024.0;
  const double unit = mib ? 1024.0 * 1024.0 : 1024.0;
  LineChart chart;
  chart.title = fmt::format("memory vs score, every task ({})", summary.protocol);
  chart.x_label = mib ? "KV MiB after prefill" : "KV KiB after prefill";
  chart.y_label = "score";
  chart.y_range = {0.0, 1.0};
  for (const SummaryRow& row : summary.rows) {  // sorted by method, then budget
    if (chart.series.empty() || chart.series.back().name != row.method) chart.series.push_back({row.method, {}});
    chart.series.back().points.emplace_back(row.kv_bytes / unit, row.score);
  }
  for (ChartSeries& s : chart.series) std::sort(s.points.begin(), s.points.end());
  files.push_back({"memory_vs_score.svg", render_line_chart(chart)});
}

}  // namespace

std::vector<PlotFile> make_plots(const std::vector<SampleRecord>& records) {
  if (records.empty()) fail("no results to plot");
  std::vector<PlotFile> files;
  metric_charts(records, files);
  niah_heatmaps(records, files);
  memory_chart(records, files);
  return files;
}

std::vector<std::string> write_plots(const std::vector<SampleRecord>& records, const std::string& out_dir) {
  const std::vector<PlotFile> files = make_plots(records);
  const std::filesystem::path out(out_dir);
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) fail("cannot create the output directory {}: {}", out.string(), ec.message());
  std::vector<std::string> written;
  for (const PlotFile& f : files) {
    const std::filesystem::path path = out / f.name;
    std::ofstream file(path, std::ios::binary);
    file << f.svg;
    file.close();
    if (!file) fail("cannot write {}", path.string());
    written.push_back(path.string());
  }
  return written;
}

}  // namespace kvslim::eval
