// kvslim eval: sweep methods x budgets over generated tasks x lengths (x NIAH depths) x samples,
// or over the samples of a LongBench file, with greedy generation under a protocol, scores and
// intrinsic metrics; resumable and shardable.
#include <fmt/format.h>

#include <cstdio>
#include <optional>

#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/shared_options.h"
#include "eval/sample_source.h"
#include "eval/sweep.h"
#include "model/model.h"
#include "util/error.h"

namespace kvslim::cli {

namespace {

struct EvalOptions {
  std::string model;
  std::string methods;
  std::vector<int64_t> budgets;
  eval::GridOptions grid;
  std::string protocol = "query-aware";
  std::vector<std::string> metrics{"score"};
  std::string out = "eval-out";
  std::string shard = "0/1";
  std::string data;
  int response_tokens = 32;
  std::string continuation;
  int threads = 0;
  int batch = 512;
  int kv_page = 32;
  EngineOptions kv_types;  // only the page types are read
};

void run_eval(const EvalOptions& opt) {
  // Every check before the model is loaded or anything runs.
  eval::SweepOptions sweep;
  sweep.methods = eval::parse_methods(opt.methods);
  sweep.budgets = opt.budgets;
  eval::expand_runs(sweep.methods, sweep.budgets);
  const eval::MetricSet metrics = eval::parse_metrics(opt.metrics);
  sweep.runner.protocol = eval::protocol_from_name(opt.protocol);
  sweep.shard = eval::parse_shard(opt.shard);
  sweep.out_dir = opt.out;
  sweep.runner.engine.batch = opt.batch;
  sweep.runner.engine.page_tokens = opt.kv_page;
  sweep.runner.engine.cache_type_k = opt.kv_types.cache_type_k;
  sweep.runner.engine.cache_type_v = opt.kv_types.cache_type_v;
  sweep.runner.engine.validate();
  eval::IntrinsicOptions& intrinsic = sweep.runner.intrinsic;
  intrinsic.recall = metrics.recall;
  intrinsic.attn_error = metrics.attn_error;
  intrinsic.kl = metrics.kl;
  intrinsic.response_tokens = opt.response_tokens;
  const eval::TaskCatalog catalog = eval::generated_tasks();
  std::optional<eval::SampleSource> longbench;
  if (opt.data.empty()) {
    eval::expand_grid(opt.grid, catalog.find);
  } else {
    if (!opt.grid.tasks.empty() || !opt.grid.lengths.empty() || !opt.grid.depths.empty())
      fail("--data replaces --tasks, --lengths and --depths: give one or the other");
    eval::LongBenchData data = eval::read_longbench_file(opt.data);
    for (const std::string& error : data.errors) fmt::print(stderr, "warning: {} {} (skipped)\n", opt.data, error);
    longbench = eval::longbench_source(std::move(data.samples));
  }

  const auto model = Model::load(opt.model);
  if (!opt.continuation.empty()) {
    intrinsic.continuation = model->tokenizer().encode(opt.continuation, false, false);
    if (intrinsic.continuation.empty()) fail("--continuation '{}' has no tokens", opt.continuation);
  }
  ThreadPool pool(opt.threads);
  const eval::SampleSource source = longbench ? *longbench : eval::generated_source(opt.grid, catalog, model->tokenizer());
  Progress progress;
  const eval::SweepOutcome outcome = eval::run_sweep(*model, pool, source, sweep, std::ref(progress));
  progress.finish();
  fmt::print("{}", eval::summary_markdown(outcome.summary));
  fmt::print(stderr, "eval: {} runs done, {} already in {}/samples.jsonl; summary in {}/summary.csv and summary.md\n",
             outcome.ran, outcome.skipped, opt.out, opt.out);
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto opt = std::make_shared<EvalOptions>();
  CLI::App* cmd = app.add_subcommand("eval", "sweep compression methods and budgets over generated long-context tasks");
  cmd->add_option("-m,--model", opt->model, "GGUF model")->required();
  cmd->add_option("--methods", opt->methods, "methods, comma-separated; options as NAME:key=value,key=value")->required();
  cmd->add_option("--budgets", opt->budgets, "budgets in tokens per layer and KV head (full ignores them)")->delimiter(',');
  cmd->add_option("--tasks", opt->grid.tasks, "generated tasks (see the README), comma-separated")->delimiter(',');
  cmd->add_option("--lengths", opt->grid.lengths, "prompt lengths in tokens, comma-separated")->delimiter(',');
  cmd->add_option("--data", opt->data, "LongBench-format JSONL to run instead of generated tasks");
  cmd->add_option("--samples", opt->grid.samples, "samples per task, length and depth")->capture_default_str();
  cmd->add_option("--seed", opt->grid.seed, "sample i uses seed S+i")->capture_default_str();
  cmd->add_option("--depths", opt->grid.depths, "needle depths in [0, 1]: single-needle tasks run once per depth (NIAH grid)")
      ->delimiter(',');
  cmd->add_option("--protocol", opt->protocol, "query-aware or query-agnostic")->capture_default_str();
  cmd->add_option("--metrics", opt->metrics, "score, recall, attn_error, kl (score always runs)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--response-tokens", opt->response_tokens, "greedy response length N of the intrinsic metrics")
      ->capture_default_str();
  cmd->add_option("--continuation", opt->continuation, "text that kl and ppl_ratio are teacher-forced on instead");
  cmd->add_option("--out", opt->out, "output directory")->capture_default_str();
  cmd->add_option("--shard", opt->shard, "run only samples whose grid index is i mod n (i/n)")->capture_default_str();
  cmd->add_option("--threads", opt->threads, "threads (0: all cores)")->capture_default_str();
  add_kv_type_options(*cmd, opt->kv_types);
  cmd->add_option("--batch", opt->batch, "prefill chunk size in tokens")->capture_default_str();
  cmd->add_option("--kv-page", opt->kv_page, "KV page size in tokens per head (small pages follow small budgets)")
      ->capture_default_str();
  cmd->callback([opt] { run_eval(*opt); });
}

}  // namespace kvslim::cli
