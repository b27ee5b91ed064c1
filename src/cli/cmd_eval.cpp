// kvslim eval: sweep methods x budgets over generated tasks x lengths (x NIAH depths) x samples,
// or over the samples of a LongBench file, with greedy generation under a protocol, scores and
// intrinsic metrics; resumable and shardable.
#include <fmt/format.h>

#include <cstdio>
#include <optional>

#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/shared_options.h"
#include "eval/eval_request.h"
#include "model/model.h"
#include "util/error.h"

namespace kvslim::cli {

namespace {

struct EvalOptions {
  std::string model;
  eval::EvalRequest request;
  int threads = 0;
  EngineOptions kv_types;  // only the page types are read
};

void run_eval(const EvalOptions& opt) {
  // Every check before the model is loaded or anything runs.
  eval::EvalRequest request = opt.request;
  request.cache_type_k = opt.kv_types.cache_type_k;
  request.cache_type_v = opt.kv_types.cache_type_v;
  const eval::PreparedEval prepared =
      eval::prepare_eval(request, [](const std::string& w) { fmt::print(stderr, "warning: {}\n", w); });
  const auto model = Model::load(opt.model);
  ThreadPool pool(opt.threads);
  Progress progress;
  const eval::SweepOutcome outcome = eval::run_eval(*model, pool, prepared, std::ref(progress));
  progress.finish();
  fmt::print("{}", eval::summary_markdown(outcome.summary));
  fmt::print(stderr, "eval: {} runs done, {} already in {}/samples.jsonl; summary in {}/summary.csv and summary.md\n",
             outcome.ran, outcome.skipped, request.out, request.out);
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto opt = std::make_shared<EvalOptions>();
  CLI::App* cmd = app.add_subcommand("eval", "sweep compression methods and budgets over generated long-context tasks");
  cmd->add_option("-m,--model", opt->model, "GGUF model")->required();
  cmd->add_option("--methods", opt->request.methods, "methods, comma-separated; options as NAME:key=value,key=value")
      ->required();
  cmd->add_option("--budgets", opt->request.budgets, "budgets in tokens per layer and KV head (full ignores them)")
      ->delimiter(',');
  cmd->add_option("--tasks", opt->request.grid.tasks, "generated tasks (see the README), comma-separated")
      ->delimiter(',');
  cmd->add_option("--lengths", opt->request.grid.lengths, "prompt lengths in tokens, comma-separated")->delimiter(',');
  cmd->add_option("--data", opt->request.data, "LongBench-format JSONL to run instead of generated tasks");
  cmd->add_option("--samples", opt->request.grid.samples, "samples per task, length and depth")->capture_default_str();
  cmd->add_option("--seed", opt->request.grid.seed, "sample i uses seed S+i")->capture_default_str();
  cmd->add_option("--depths", opt->request.grid.depths,
                  "needle depths in [0, 1]: single-needle tasks run once per depth (NIAH grid)")
      ->delimiter(',');
  cmd->add_option("--protocol", opt->request.protocol,
                  "query-aware, query-agnostic or multi-turn (niah_multiquery: one question per turn)")
      ->capture_default_str();
  cmd->add_option("--metrics", opt->request.metrics, "score, recall, attn_error, kl (score always runs)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--response-tokens", opt->request.response_tokens,
                  "greedy response length N of the intrinsic metrics")
      ->capture_default_str();
  cmd->add_option("--continuation", opt->request.continuation,
                  "text that kl and ppl_ratio are teacher-forced on instead");
  cmd->add_option("--out", opt->request.out, "output directory")->capture_default_str();
  cmd->add_option("--shard", opt->request.shard, "run only samples whose grid index is i mod n (i/n)")
      ->capture_default_str();
  cmd->add_option("--threads", opt->threads, "threads (0: all cores)")->capture_default_str();
  add_kv_type_options(*cmd, opt->kv_types);
  cmd->add_option("--batch", opt->request.batch, "prefill chunk size in tokens")->capture_default_str();
  cmd->add_option("--kv-page", opt->request.kv_page,
                  "KV page size in tokens per head (small pages follow small budgets)")
      ->capture_default_str();
  cmd->callback([opt] { run_eval(*opt); });
}

}  // namespace kvslim::cli
