#include "eval/sweep_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>

#include "util/error.h"

namespace kvslim::eval {

namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

template <class T>
void check_list(const std::vector<T>& items, const char* option) {
  if (items.empty()) fail("{} is empty", option);
  std::set<T> seen;
  for (const T& item : items)
    if (!seen.insert(item).second) fail("{} lists {} twice", option, item);
}

}  // namespace

CompressionOptions MethodSpec::compression(std::optional<int64_t> budget) const {
  CompressionOptions c;
  c.press = press;
  c.press_options = options;
  c.budget = budget;
  return c;
}

std::unique_ptr<Press> MethodSpec::make() const { return compression(std::nullopt).prepare().press; }

std::vector<MethodSpec> parse_methods(const std::string& list) {
  std::vector<MethodSpec> methods;
  for (const std::string& item : split(list, ',')) {
    if (item.empty()) fail("--methods has an empty entry in '{}'", list);
    const size_t colon = item.find(':');
    if (colon == std::string::npos && item.find('=') != std::string::npos) {
      if (methods.empty() || methods.back().label.find(':') == std::string::npos)
        fail("--methods: option '{}' follows no method (write NAME:key=value,key=value)", item);
      methods.back().options.push_back(item);
      methods.back().label += "," + item;
      continue;
    }
    MethodSpec m;
    m.label = item;
    m.press = item;
    if (colon != std::string::npos && item.find('=', colon) != std::string::npos) {
      m.press = item.substr(0, colon);
      m.options.push_back(item.substr(colon + 1));
    }
    methods.push_back(std::move(m));
  }
  std::vector<std::string> labels;
  for (const MethodSpec& m : methods) {
    m.make();  // unknown names and bad options fail here, before any work
    labels.push_back(m.label);
  }
  check_list(labels, "--methods");
  return methods;
}

std::vector<MethodRun> expand_runs(const std::vector<MethodSpec>& methods, const std::vector<int64_t>& budgets) {
  if (methods.empty()) fail("--methods is empty");
  const bool all_full = std::all_of(methods.begin(), methods.end(), [](const MethodSpec& m) { return m.is_full(); });
  if (!all_full) check_list(budgets, "--budgets");
  for (int64_t b : budgets)
    if (b <= 0) fail("--budgets: a budget must be > 0 (got {})", b);
  std::vector<MethodRun> runs;
  for (const MethodSpec& m : methods) {
    if (m.is_full()) {
      runs.push_back({&m, 0});
      continue;
    }
    for (int64_t b : budgets) {
      m.compression(b).prepare();  // the method refuses a budget its options cannot work with
      runs.push_back({&m, b});
    }
  }
  return runs;
}

MetricSet parse_metrics(const std::vector<std::string>& names) {
  if (names.empty()) fail("--metrics is empty");
  MetricSet m;
  for (const std::string& n : names) {
    if (n == "score") continue;
    if (n == "recall")
      m.recall = true;
    else if (n == "attn_error")
      m.attn_error = true;
    else if (n == "kl")
      m.kl = true;
    else
      fail("unknown metric '{}' (valid: score, recall, attn_error, kl)", n);
  }
  return m;
}

Shard parse_shard(const std::string& text) {
  const size_t slash = text.find('/');
  Shard s;
  const auto number = [&](size_t begin, size_t end, int& out) {
    const auto [ptr, ec] = std::from_chars(text.data() + begin, text.data() + end, out);
    return ec == std::errc() && ptr == text.data() + end && end > begin;
  };
  if (slash == std::string::npos || !number(0, slash, s.index) || !number(slash + 1, text.size(), s.count) ||
      s.count < 1 || s.index < 0 || s.index >= s.count)
    fail("--shard '{}' is not i/n with 0 <= i < n (e.g. 0/4)", text);
  return s;
}

std::vector<SampleSpec> expand_grid(const GridOptions& grid,
                                    const std::function<const tasks::TaskInfo&(const std::string&)>& find_task) {
  check_list(grid.tasks, "--tasks");
  check_list(grid.lengths, "--lengths");
  if (!grid.depths.empty()) check_list(grid.depths, "--depths");
  if (grid.samples < 1) fail("--samples must be >= 1 (got {})", grid.samples);
  for (double d : grid.depths)
    if (!(d >= 0 && d <= 1)) fail("--depths: {} is outside [0, 1]", d);
  std::vector<const tasks::TaskInfo*> infos;
  for (const std::string& task : grid.tasks) {
    const tasks::TaskInfo& info = find_task(task);
    for (int64_t length : grid.lengths)
      if (length < info.min_tokens)
        fail("--lengths: {} tokens is below the minimum of task {} ({} tokens)", length, task, info.min_tokens);
    infos.push_back(&info);
  }
  std::vector<SampleSpec> specs;
  for (const tasks::TaskInfo* info : infos)
    for (int64_t length : grid.lengths) {
      const bool grid_depths = info->takes_depth && !grid.depths.empty();
      const std::vector<double> depths = grid_depths ? grid.depths : std::vector<double>{-1};
      for (double depth : depths)
        for (int i = 0; i < grid.samples; ++i) {
          SampleSpec s;
          s.task = info->name;
          s.label = depth >= 0 ? fmt::format("{}@{}", info->name, depth) : info->name;
          s.length = length;
          s.depth = depth;
          s.seed = grid.seed + uint64_t(i);
          specs.push_back(std::move(s));
        }
    }
  return specs;
}

}  // namespace kvslim::eval
