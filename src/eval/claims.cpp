#include "eval/claims.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "util/error.h"

namespace kvslim::eval {

namespace {

constexpr const char* kLag = "lagkv:mode=oneshot";  // ranked for the same budget as the others
constexpr const char* kRocketMT = "rocketkv:mt=true";
constexpr const char* kBlockBaselines[] = {"snapkv", "tova", "h2o", "streaming_llm"};

std::string lookahead_label(const ClaimsPlan& plan) { return "lookaheadkv:adapter=" + plan.adapter; }

std::optional<double> metric_of(const SampleRecord& r, const std::string& metric) {
  if (metric == "score") return r.score;
  if (metric == "recall") return r.recall;
  if (metric == "score_ms") return r.score_ms;
  if (metric == "kv_bytes_peak") return double(r.kv_bytes_peak);
  if (metric == "kv_bytes") return double(r.kv_bytes);
  fail("claims: unknown metric '{}'", metric);
}

std::string sample_key(const SampleRecord& r) { return fmt::format("{}|{}|{}|{}", r.task, r.length, r.depth, r.seed); }

// (a, b) per sample both methods ran at `budget`, in key order.
std::vector<std::pair<double, double>> pairs_of(const std::vector<SampleRecord>& records, const std::string& a,
                                                const std::string& b, int64_t budget, const std::string& metric) {
  std::map<std::string, std::optional<double>> of_a, of_b;
  for (const SampleRecord& r : records) {
    if (r.budget != budget) continue;
    if (r.method == a) of_a[sample_key(r)] = metric_of(r, metric);
    if (r.method == b) of_b[sample_key(r)] = metric_of(r, metric);
  }
  std::vector<std::pair<double, double>> out;
  for (const auto& [key, va] : of_a) {
    const auto it = of_b.find(key);
    if (it != of_b.end() && va && it->second) out.emplace_back(*va, *it->second);
  }
  return out;
}

std::string short_name(const std::string& label) {
  if (label == kLag) return "lagkv";
  if (label.rfind("lookaheadkv:", 0) == 0) return "lookaheadkv";
  if (label == kRocketMT) return "rocketkv-mt";
  if (label.rfind("keydiff:", 0) == 0) return "keydiff";
  const std::string block = ":prefill=block";  // the setting says every method is block-wise
  if (label.size() > block.size() && label.compare(label.size() - block.size(), block.size(), block) == 0)
    return label.substr(0, label.size() - block.size());
  return label;
}

// "keydiff:block=128" and "snapkv:prefill=block" etc.: every method of KeyDiff's setting evicts
// after each prefill block of the same size (the engine's --batch is set to it as well).
std::string block_label(const std::string& method, int64_t block) {
  return method == "keydiff" ? fmt::format("keydiff:block={}", block) : method + ":prefill=block";
}

double max_of(const std::vector<SampleRecord>& records, const std::string& method, int64_t budget,
              const std::string& metric) {
  double best = 0;
  for (const SampleRecord& r : records)
    if (r.method == method && r.budget == budget)
      if (const auto v = metric_of(r, metric)) best = std::max(best, *v);
  return best;
}

enum class Kind { Above, Close };

struct Comparison {
  std::string paper, claim, setting;
  const std::vector<SampleRecord>* records;
  std::string a, b, metric = "score";
  Kind kind = Kind::Above;
};

ClaimRow compare(const Comparison& c, int64_t budget, double margin) {
  ClaimRow row{c.paper, c.claim, c.setting, budget, "", "", ""};
  const auto pairs = pairs_of(*c.records, c.a, c.b, budget, c.metric);
  std::vector<double> d;
  double sum_a = 0, sum_b = 0;
  for (const auto& [x, y] : pairs) {
    d.push_back(x - y);
    sum_a += x;
    sum_b += y;
  }
  const double n = double(std::max<size_t>(pairs.size(), 1));
  row.figures = fmt::format("{} {:.3f} vs {} {:.3f} (n={})", short_name(c.a), sum_a / n, short_name(c.b), sum_b / n,
                            pairs.size());
  const PairedInterval ci = paired_interval(d);
  row.interval = format_interval(ci);
  row.verdict = verdict_name(c.kind == Kind::Above ? verdict_above(ci) : verdict_close(ci, margin));
  return row;
}

ClaimRow not_measured(std::string paper, std::string claim, std::string why) {
  return {std::move(paper), std::move(claim), std::move(why), 0, "", "", "not measured"};
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace

ClaimsPlan claims_plan(bool quick, std::string adapter) {
  ClaimsPlan plan;
  plan.tasks = {"niah_single_1", "niah_single_2", "passkey", "niah_multikey_1"};
  plan.lengths = quick ? std::vector<int64_t>{1024} : std::vector<int64_t>{1024, 2048, 4096};
  plan.budgets = {64, 128};
  plan.samples = 8;
  plan.mt_samples = 16;  // one task instead of three: more samples to pair per length
  plan.adapter = std::move(adapter);
  return plan;
}

std::vector<ClaimsSweep> claims_sweeps(const ClaimsPlan& plan, const std::string& out_dir) {
  GridOptions grid{plan.tasks, plan.lengths, {}, plan.samples, 0};
  auto sweep = [&](const std::string& dir, const std::string& methods, Protocol protocol, bool recall) {
    ClaimsSweep s;
    s.dir = dir;
    s.grid = grid;
    s.options.methods = parse_methods(methods);
    s.options.budgets = plan.budgets;
    s.options.runner.protocol = protocol;
    s.options.runner.engine.page_tokens = 16;  // pages small enough for KV bytes to follow budget 32
    s.options.runner.intrinsic.recall = recall;
    s.options.out_dir = (std::filesystem::path(out_dir) / dir).string();
    expand_runs(s.options.methods, s.options.budgets);  // checks every budget before any run
    return s;
  };
  std::vector<std::string> aware = {"snapkv", "dapq", "laq", "rocketkv", "quest", "sparq", "exact_topk"};
  if (!plan.adapter.empty()) aware.push_back(lookahead_label(plan));
  std::vector<std::string> block = {block_label("keydiff", plan.block)};
  for (const char* m : kBlockBaselines) block.push_back(block_label(m, plan.block));
  std::vector<ClaimsSweep> sweeps = {
      sweep("query-agnostic", join({kLag, "snapkv", "streaming_llm"}), Protocol::QueryAgnostic, false),
      sweep("query-aware", join(aware), Protocol::QueryAware, false),
      sweep("recall", "dapq,snapkv", Protocol::QueryAware, true),
      sweep("block-prefill", join(block), Protocol::QueryAware, false),
      sweep("multi-turn", join({kRocketMT, "rocketkv", "exact_topk", "snapkv"}), Protocol::MultiTurn, false)};
  sweeps[3].options.runner.engine.batch = int(plan.block);  // prefill=block evicts after each --batch block
  sweeps[4].grid = GridOptions{{plan.mt_task}, plan.lengths, {}, plan.mt_samples, 0};
  return sweeps;
}

std::vector<double> paired_differences(const std::vector<SampleRecord>& records, const std::string& a,
                                       const std::string& b, int64_t budget, const std::string& metric) {
  std::vector<double> d;
  for (const auto& [x, y] : pairs_of(records, a, b, budget, metric)) d.push_back(x - y);
  return d;
}

std::vector<SampleRecord> mean_over_turns(const std::vector<SampleRecord>& records, int first_turn) {
  struct Acc {
    SampleRecord record;
    double sum = 0;
    int n = 0;
  };
  std::map<std::string, Acc> by_sample;  // key: method, budget and sample
  std::vector<std::string> order;
  for (const SampleRecord& r : records) {
    const size_t cut = r.task.rfind("/turn");
    if (cut == std::string::npos) continue;
    const int turn = std::atoi(r.task.c_str() + cut + 5);
    if (turn < first_turn) continue;
    SampleRecord base = r;
    base.task = r.task.substr(0, cut);
    const std::string key = fmt::format("{}|{}|{}", r.method, r.budget, sample_key(base));
    auto [it, fresh] = by_sample.try_emplace(key);
    if (fresh) it->second.record = base, order.push_back(key);
    it->second.sum += r.score;
    ++it->second.n;
    it->second.record.kv_bytes_peak = std::max(it->second.record.kv_bytes_peak, r.kv_bytes_peak);
    it->second.record.kv_bytes = std::max(it->second.record.kv_bytes, r.kv_bytes);
  }
  std::vector<SampleRecord> out;
  for (const std::string& key : order) {
    Acc& acc = by_sample.at(key);
    acc.record.score = acc.sum / acc.n;
    out.push_back(acc.record);
  }
  return out;
}

std::vector<ClaimRow> claim_rows(const ClaimsPlan& plan, const ClaimsRecords& all) {
  // Only the plan's samples: a directory resumed from a larger plan holds more, and every
  // comparison must pair the same set.
  auto in_plan = [&](const std::vector<SampleRecord>& records, const std::vector<std::string>& tasks, int samples) {
    std::vector<SampleRecord> out;
    for (const SampleRecord& r : records) {
      const std::string task = r.task.substr(0, r.task.rfind("/turn"));  // a multi-turn record's task
      if (r.seed < uint64_t(samples) && std::count(plan.lengths.begin(), plan.lengths.end(), r.length) &&
          std::count(tasks.begin(), tasks.end(), task))
        out.push_back(r);
    }
    return out;
  };
  const std::vector<SampleRecord> agnostic = in_plan(all.agnostic, plan.tasks, plan.samples),
                                  aware = in_plan(all.aware, plan.tasks, plan.samples),
                                  recall = in_plan(all.recall, plan.tasks, plan.samples),
                                  block = in_plan(all.block, plan.tasks, plan.samples),
                                  later_turns =
                                      mean_over_turns(in_plan(all.multi_turn, {plan.mt_task}, plan.mt_samples), 2);
  const std::string lengths = join([&] {
    std::vector<std::string> s;
    for (int64_t l : plan.lengths) s.push_back(std::to_string(l));
    return s;
  }());
  const std::string grid = fmt::format("{} at {} tokens", join(plan.tasks), lengths);
  const std::string agn = "query-agnostic (question appended after compression), " + grid;
  const std::string qa = "query-aware, " + grid;

  std::vector<Comparison> comparisons = {
      {"LagKV", "above SnapKV without using queries", agn, &agnostic, kLag, "snapkv"},
      {"LagKV", "above StreamingLLM without using queries", agn, &agnostic, kLag, "streaming_llm"},
  };
  const std::string kd = fmt::format(
      "{}; every method block-wise: evicts after each {}-token prefill block (keydiff:block={}, the others "
      "prefill=block, --batch {}), so a head holds at most B + {} tokens; peak KV: the largest over the samples, "
      "MiB (end-of-prefill SnapKV's, the whole prompt cached, for comparison)",
      qa, plan.block, plan.block, plan.block, plan.block);
  for (const char* other : kBlockBaselines)
    comparisons.push_back({"KeyDiff", fmt::format("above {} under block-wise prefill, bounded memory", other), kd,
                           &block, block_label("keydiff", plan.block), block_label(other, plan.block)});
  comparisons.push_back({"DapQ", "above SnapKV at small budgets", qa, &aware, "dapq", "snapkv"});
  comparisons.push_back(
      {"DapQ", "closer than SnapKV to the true-query oracle (recall@B)",
       qa + "; oracle: the top-B positions of the full cache's own 32-token greedy response's attention", &recall,
       "dapq", "snapkv", "recall"});
  if (!plan.adapter.empty()) {
    const std::string la = lookahead_label(plan);
    comparisons.push_back({"LookaheadKV", "above SnapKV at small budgets", qa, &aware, la, "snapkv"});
    comparisons.push_back({"LookaheadKV", "above LAQ at small budgets", qa, &aware, la, "laq"});
    comparisons.push_back({"LookaheadKV", "scoring costs a fraction of LAQ's (score_ms, LAQ minus LookaheadKV)",
                           qa + "; time in the method's hooks per sample", &aware, "laq", la, "score_ms"});
  }
  const std::string rk =
      qa +
      "; equal traffic: RocketKV's B is its per-step traffic (docs/methods.md#rocketkv split), Quest, SparQ "
      "and Exact-TopK read k = B tokens per step, SnapKV stores B";
  comparisons.push_back(
      {"RocketKV", "close to Exact-TopK (within ±0.05)", rk, &aware, "rocketkv", "exact_topk", "score", Kind::Close});
  for (const char* other : {"quest", "sparq", "snapkv"})
    comparisons.push_back({"RocketKV", fmt::format("above {} at equal traffic", other), rk, &aware, "rocketkv", other});
  const std::string mt = fmt::format(
      "multi-turn: {} at {} tokens, its 4 questions asked one turn after another in one session (turn 1: context + "
      "question 1), greedy; per sample the mean score of turns 2-4 is paired; equal traffic as above (rocketkv-mt "
      "keeps the full KV and re-selects its working set each turn, plain rocketkv evicts at each turn); KV kept: "
      "the largest KV in use after a later turn's prefill over the samples, MiB (what equal traffic costs in memory)",
      plan.mt_task, lengths);
  comparisons.push_back({"RocketKV", "RocketKV-MT close to Exact-TopK in later turns (within ±0.05)", mt, &later_turns,
                         kRocketMT, "exact_topk", "score", Kind::Close});
  for (const char* other : {"rocketkv", "snapkv"})
    comparisons.push_back({"RocketKV", fmt::format("RocketKV-MT above {} in later turns at equal traffic", other), mt,
                           &later_turns, kRocketMT, other});

  std::vector<ClaimRow> rows;
  for (const Comparison& c : comparisons)
    for (int64_t budget : plan.budgets) {
      ClaimRow row = compare(c, budget, plan.close_margin);
      // The memory side of a claim is measured, not assumed: the largest KV any sample held.
      if (c.records == &block)
        row.figures +=
            fmt::format("; peak KV {:.2f} vs {:.2f} ({:.2f})", max_of(block, c.a, budget, "kv_bytes_peak") / 1048576.0,
                        max_of(block, c.b, budget, "kv_bytes_peak") / 1048576.0,
                        max_of(aware, "snapkv", budget, "kv_bytes_peak") / 1048576.0);
      if (c.records == &later_turns)
        row.figures +=
            fmt::format("; KV kept {:.2f} vs {:.2f}", max_of(later_turns, c.a, budget, "kv_bytes") / 1048576.0,
                        max_of(later_turns, c.b, budget, "kv_bytes") / 1048576.0);
      rows.push_back(std::move(row));
    }
  if (plan.adapter.empty())
    rows.push_back(not_measured("LookaheadKV", "above SnapKV and LAQ at a fraction of LAQ's cost",
                                "no LookaheadKV adapter for this model (--adapter FILE)"));
  return rows;
}

std::string claims_markdown(const std::vector<ClaimRow>& rows) {
  std::string out = "| paper | claim | B | ours | difference [95% CI] | verdict |\n|---|---|---|---|---|---|\n";
  std::map<std::string, std::string> settings;  // footnotes: each distinct setting once
  std::vector<std::string> order;
  for (const ClaimRow& r : rows) {
    if (!settings.count(r.setting)) {
      settings[r.setting] = fmt::format("[{}]", settings.size() + 1);
      order.push_back(r.setting);
    }
    out += fmt::format("| {} | {} {} | {} | {} | {} | {} |\n", r.paper, r.claim, settings[r.setting],
                       r.budget ? std::to_string(r.budget) : "-", r.figures, r.interval, r.verdict);
  }
  out += "\n";
  for (const std::string& s : order) out += fmt::format("{} {}\n", settings[s], s);
  return out;
}

}  // namespace kvslim::eval
