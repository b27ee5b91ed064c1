// kvslim bench: prefill tok/s per prompt length and decode tok/s per context length.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "cli/commands.h"
#include "cli/shared_options.h"
#include "engine/system_info.h"
#include "model/weight_residency.h"
#include "tensor/isa.h"

namespace kvslim::cli {

namespace {

// unit: "prompt" (prefill) or "token" (decode), what the times and calls are per.
nlohmann::json profile_json(const BenchPoint& p, const std::string& unit) {
  nlohmann::json ops = nlohmann::json::array();
  for (const auto& o : p.profile)
    ops.push_back({{"op", o.op}, {"ms_per_" + unit, o.ms}, {"calls_per_" + unit, o.calls}});
  return ops;
}

// Scopes nest (the matmuls and matvecs include their pool wait), so shares are of the measured time.
void print_profile(const BenchPoint& p, const char* what, const char* unit) {
  if (p.profile.empty()) return;
  fmt::print("{} profile at {} (ms per {}; pool wait is inside the matvecs)\n", what, p.length, unit);
  for (const auto& o : p.profile)
    fmt::print("  {:<20} {:>9.3f} ms {:>6.1f}% {:>8.1f} calls\n", o.op, o.ms, 100.0 * o.ms / p.ms.median, o.calls);
}

nlohmann::json to_json(const BenchPoint& p, const char* length_key, const std::string& unit) {
  return {{length_key, p.length},
          {"tok_s", {{"median", p.tokens_per_s.median}, {"min", p.tokens_per_s.min}, {"max", p.tokens_per_s.max}}},
          {"ms", {{"median", p.ms.median}, {"min", p.ms.min}, {"max", p.ms.max}}},
          {"score_ms", {{"median", p.score_ms.median}, {"min", p.score_ms.min}, {"max", p.score_ms.max}}},
          {"kv_bytes", p.kv_bytes},
          {"kv_bytes_peak", p.kv_bytes_peak},
          {"storage_tokens", p.token_cost ? nlohmann::json(p.token_cost->storage) : nlohmann::json()},
          {"traffic_tokens", p.token_cost ? nlohmann::json(p.token_cost->traffic) : nlohmann::json()},
          {"profile", profile_json(p, unit)}};
}

// Token-equivalents per head, or "-" for sparse attention without a report.
std::string cost_cell(const std::optional<TokenCost>& c, bool traffic) {
  return c ? fmt::format("{:.1f}", traffic ? c->traffic : c->storage) : "-";
}

void print_table(const char* title, const char* length_name, const char* ms_name,
                 const std::vector<BenchPoint>& points) {
  fmt::print("{}\n{:>10} {:>12} {:>12} {:>12} {:>14} {:>12} {:>14} {:>14} {:>10} {:>10}\n", title, length_name,
             "tok/s med", "tok/s min", "tok/s max", ms_name, "score ms", "KV bytes", "KV peak", "storage", "traffic");
  for (const auto& p : points)
    fmt::print("{:>10} {:>12.2f} {:>12.2f} {:>12.2f} {:>14.2f} {:>12.2f} {:>14} {:>14} {:>10} {:>10}\n", p.length,
               p.tokens_per_s.median, p.tokens_per_s.min, p.tokens_per_s.max, p.ms.median, p.score_ms.median,
               p.kv_bytes, p.kv_bytes_peak, cost_cell(p.token_cost, false), cost_cell(p.token_cost, true));
}

}  // namespace

void add_bench_command(CLI::App& app) {
  struct Options {
    std::string model;
    BenchOptions bench;
    int threads = 0;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("bench", "measure prefill and decode speed (medians with min/max)");
  cmd->add_option("-m,--model", opt->model, "GGUF model")->required();
  cmd->add_option("--prompt-lengths", opt->bench.prompt_lengths, "prefill prompt lengths")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--context-lengths", opt->bench.context_lengths, "decode context lengths")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--reps", opt->bench.reps, "repetitions per measurement")->capture_default_str();
  cmd->add_option("--decode-tokens", opt->bench.decode_tokens, "tokens decoded per repetition")->capture_default_str();
  cmd->add_option("--batch", opt->bench.batch, "prefill chunk size")->capture_default_str();
  add_compression_options(*cmd, opt->bench.compression);
  add_kv_type_options(*cmd, opt->bench.engine);
  cmd->add_option("--threads", opt->threads, "threads (0: all cores)")->capture_default_str();
  cmd->add_flag(
      "--profile", opt->bench.profile,
      "time each op of the prefills and decode steps (matmuls/matvecs, attention, norms, sampling, pool wait)");
  cmd->add_flag("--json", opt->json, "print JSON");
  cmd->callback([opt] {
    const auto model = Model::load(opt->model);
    ThreadPool pool(opt->threads);
    const BenchReport report = run_bench(*model, pool, opt->bench);
    if (opt->json) {
      nlohmann::json out = {{"model", opt->model},
                            {"threads", pool.size()},
                            {"reps", opt->bench.reps},
                            {"press", opt->bench.compression.press},
                            {"system", system_info(model->config().head_dim)},
                            // Weights a decoded token reads (attention, router, its k experts, one
                            // embedding row, the output): a MoE model's active parameters in bytes.
                            {"weight_bytes", model->weight_bytes()},
                            {"weights_in", residency_name(model->file().residency())},
                            {"weight_bytes_per_token", model->active_weight_bytes_per_token()},
                            {"prefill", nlohmann::json::array()},
                            {"decode", nlohmann::json::array()}};
      for (const auto& p : report.prefill) out["prefill"].push_back(to_json(p, "prompt_length", "prompt"));
      for (const auto& p : report.decode) out["decode"].push_back(to_json(p, "context_length", "token"));
      fmt::print("{}\n", out.dump(2));
      return;
    }
    fmt::print("model {} (weights in {}), {} threads, {} reps, press {}, kernels {} on {}\n", opt->model,
               residency_name(model->file().residency()), pool.size(), opt->bench.reps, opt->bench.compression.press,
               isa_name(active_isa()), cpu_description());
    print_table("prefill", "prompt", "ms/prompt", report.prefill);
    print_table("decode", "context", "ms/token", report.decode);
    for (const auto& p : report.prefill) print_profile(p, "prefill", "prompt");
    for (const auto& p : report.decode) print_profile(p, "decode", "token");
  });
}

}  // namespace kvslim::cli
