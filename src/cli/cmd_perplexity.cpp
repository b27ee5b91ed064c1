// kvslim perplexity: llama-perplexity's number for a model and a text, optionally with the first
// half of each chunk compressed by a method (see src/eval/perplexity.h for exactly how).
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdio>

#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/prompt_input.h"
#include "cli/shared_options.h"
#include "eval/perplexity.h"
#include "model/model.h"

namespace kvslim::cli {

namespace {

struct PerplexityCliOptions {
  std::string model;
  std::string text_file;
  eval::PerplexityOptions ppl;
  EngineOptions kv_types;  // only its cache types are used
  int threads = 0;
  bool json = false;
};

void run_perplexity(const PerplexityCliOptions& opt) {
  const auto model = Model::load(opt.model);
  const std::string text = read_bytes(opt.text_file, "text file");
  const std::vector<int32_t> tokens = eval::perplexity_tokens(*model, text);
  ThreadPool pool(opt.threads);
  const bool terminal = isatty(fileno(stderr)) != 0;
  const int first = opt.ppl.ctx / 2;
  auto progress = [&](int done, int total, double elapsed) {
    // Printed once the input has passed validation, so that an error stays the only line.
    if (done == 1) {
      fmt::print(stderr, "perplexity: {} tokens, {} chunks of {} (scoring {} tokens each), {} threads, press {}\n",
                 tokens.size(), total, opt.ppl.ctx, opt.ppl.ctx - first - 1, pool.size(), opt.ppl.compression.press);
    }
    const double eta = elapsed / done * (total - done);
    fmt::print(stderr, "{}[{}/{}] elapsed {}, ETA {}{}", terminal ? "\r" : "", done, total, format_duration(elapsed),
               format_duration(eta), terminal ? "\x1b[K" : "\n");
    if (terminal && done == total) fmt::print(stderr, "\n");
    std::fflush(stderr);
  };
  const eval::PerplexityResult r = eval::perplexity(*model, pool, tokens, opt.ppl, progress);
  if (opt.json) {
    nlohmann::json chunks = nlohmann::json::array();
    for (const eval::PerplexityChunk& c : r.chunks) {
      chunks.push_back({{"ppl", c.ppl},
                        {"cumulative_ppl", c.cumulative_ppl},
                        {"nll", c.nll},
                        {"scored", c.scored},
                        {"kept_tokens", c.kept_tokens},
                        {"seconds", c.seconds}});
    }
    const nlohmann::json out = {
        {"model", opt.model},
        {"text", opt.text_file},
        {"ppl", r.ppl},
        {"ppl_error", r.ppl_error},
        {"ctx", opt.ppl.ctx},
        {"batch", opt.ppl.batch},
        {"tokens", r.tokens_total},
        {"tokens_scored", r.tokens_scored},
        {"seconds", r.seconds},
        {"press", opt.ppl.compression.press},
        {"budget", opt.ppl.compression.budget ? nlohmann::json(*opt.ppl.compression.budget) : nlohmann::json()},
        {"ratio", opt.ppl.compression.ratio ? nlohmann::json(*opt.ppl.compression.ratio) : nlohmann::json()},
        {"threads", pool.size()},
        {"chunks", chunks},
    };
    fmt::print("{}\n", out.dump());
  } else {
    std::string line;
    for (size_t i = 0; i < r.chunks.size(); ++i) line += fmt::format("[{}]{:.4f},", i + 1, r.chunks[i].cumulative_ppl);
    fmt::print("{}\n", line);
    fmt::print("Final estimate: PPL = {:.4f} +/- {:.5f} ({} tokens scored, {:.1f} s)\n", r.ppl, r.ppl_error,
               r.tokens_scored, r.seconds);
  }
}

}  // namespace

void add_perplexity_command(CLI::App& app) {
  auto opt = std::make_shared<PerplexityCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "perplexity", "perplexity of a text as llama-perplexity computes it (chunks of --ctx, second half scored)");
  cmd->add_option("-m,--model", opt->model, "GGUF model")->required();
  cmd->add_option("-f,--file", opt->text_file, "text file (- for stdin)")->required();
  cmd->add_option("--ctx", opt->ppl.ctx, "tokens per chunk")->capture_default_str();
  cmd->add_option("--batch", opt->ppl.batch, "forward block size in tokens")->capture_default_str();
  cmd->add_option("--chunks", opt->ppl.chunks, "chunks to score (-1: all)")->capture_default_str();
  cmd->add_option("--kv-page", opt->ppl.page_tokens, "KV page size in tokens per head")->capture_default_str();
  cmd->add_option("--threads", opt->threads, "threads (0: all cores)")->capture_default_str();
  cmd->add_flag("--json", opt->json, "print one JSON object: ppl, per-chunk values, tokens scored, time");
  add_compression_options(*cmd, opt->ppl.compression);
  add_kv_type_options(*cmd, opt->kv_types);
  cmd->callback([opt] {
    opt->ppl.cache_type_k = opt->kv_types.cache_type_k;
    opt->ppl.cache_type_v = opt->kv_types.cache_type_v;
    run_perplexity(*opt);
  });
}

}  // namespace kvslim::cli
