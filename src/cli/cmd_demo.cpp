// kvslim demo: the README's main command. On the default model (trained by kvslim itself to
// retrieve facts from long prompts), compares the full cache with several eviction methods at a
// few budgets on a few generated tasks, prints one table (score, KV memory, prefill and decode
// speed) and writes the results and SVG charts.
#include <fmt/format.h>

#include <filesystem>
#include <sstream>

#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/shared_options.h"
#include "eval/demo_table.h"
#include "eval/plots.h"
#include "eval/sample_source.h"
#include "eval/sweep.h"
#include "model/lookahead_adapter.h"
#include "model/model.h"
#include "util/error.h"

namespace kvslim::cli {

namespace {

constexpr const char* kDefaultModel = "models/kvslim-4k.gguf";
// LagKV one-shot: its default recursive mode ignores the budget (rho alone sets what is kept),
// which a table by budget cannot show.
constexpr const char* kDefaultMethods =
    "full,streaming_llm,snapkv,keydiff,dapq,lagkv:mode=oneshot,lookaheadkv,rocketkv";

// A bare `lookaheadkv` runs with the adapter beside the model (labelled `lookaheadkv` in the table).
// Without one, the default list leaves it out with a note; a list the user wrote fails, naming the
// file it looked for.
std::vector<eval::MethodSpec> methods_with_adapter(const std::string& list, const std::string& model) {
  const std::string adapter = adapter_beside(model);
  std::string rewritten;
  bool bare = false, dropped = false;
  std::istringstream items(list);
  for (std::string item; std::getline(items, item, ',');) {
    std::string m = item;
    if (item == "lookaheadkv") {
      bare = true;
      if (adapter.empty()) {
        const std::string wanted = adapter_path_beside(model);
        if (list != kDefaultMethods)
          fail(
              "demo: lookaheadkv needs an adapter and {} does not exist (write lookaheadkv:adapter=FILE, or make "
              "one with `kvslim train-lookahead`)",
              wanted);
        fmt::print(stderr, "demo: lookaheadkv left out: no adapter {} (kvslim train-lookahead makes one)\n", wanted);
        dropped = true;
        continue;
      }
      m = "lookaheadkv:adapter=" + adapter;
    }
    rewritten += (rewritten.empty() ? "" : ",") + m;
  }
  std::vector<eval::MethodSpec> methods = eval::parse_methods(rewritten);
  if (bare && !dropped)
    for (eval::MethodSpec& spec : methods)
      if (spec.label == "lookaheadkv:adapter=" + adapter) spec.label = "lookaheadkv";
  return methods;
}

struct DemoOptions {
  std::string model = kDefaultModel;
  // The seed methods where they differ; lookaheadkv takes MODEL.lookahead.gguf (methods_with_adapter).
  std::string methods = kDefaultMethods;
  std::vector<int64_t> budgets{64, 128, 256};
  eval::GridOptions grid{{"niah_single_1", "niah_single_2", "passkey", "niah_multikey_1"}, {1024, 2048}, {}, 4, 0};
  std::string out = "demo-out";
  int threads = 0;
  EngineOptions kv_types;  // only the page types are read
};

void run_demo(const DemoOptions& opt) {
  if (!std::filesystem::exists(opt.model))
    fail("model {} not found{}", opt.model,
         opt.model == kDefaultModel ? " (run from the repository root, or pass -m MODEL)" : "");
  eval::SweepOptions sweep;
  sweep.methods = methods_with_adapter(opt.methods, opt.model);
  sweep.budgets = opt.budgets;
  eval::expand_runs(sweep.methods, sweep.budgets);
  sweep.out_dir = opt.out;
  sweep.runner.engine.page_tokens = 32;  // pages small enough for KV bytes to follow small budgets
  sweep.runner.engine.cache_type_k = opt.kv_types.cache_type_k;
  sweep.runner.engine.cache_type_v = opt.kv_types.cache_type_v;
  const eval::TaskCatalog catalog = eval::generated_tasks();
  eval::expand_grid(opt.grid, catalog.find);

  // A demo always measures afresh: earlier runs in the directory would be skipped otherwise.
  const std::filesystem::path samples = std::filesystem::path(opt.out) / "samples.jsonl";
  std::error_code ec;
  std::filesystem::remove(samples, ec);
  if (ec) fail("cannot replace {}: {}", samples.string(), ec.message());

  const auto model = Model::load(opt.model);
  ThreadPool pool(opt.threads);
  fmt::print(
      "kvslim demo: {} ({} layers, dim {}, {} KV heads); methods {}; budgets {}; tasks {} at {} tokens, {} samples "
      "each\n",
      opt.model, model->config().n_layers, model->config().dim, model->config().n_kv_heads, opt.methods,
      fmt::join(opt.budgets, ","), fmt::join(opt.grid.tasks, ","), fmt::join(opt.grid.lengths, ","), opt.grid.samples);
  const eval::SampleSource source = eval::generated_source(opt.grid, catalog, model->tokenizer());
  Progress progress;
  eval::run_sweep(*model, pool, source, sweep, std::ref(progress));
  progress.finish();

  const std::vector<eval::SampleRecord> records = eval::read_records(samples.string());
  fmt::print("\n{}\n", eval::demo_markdown(eval::demo_rows(records)));
  fmt::print("per task: {}/summary.md; every run: {}\n", opt.out, samples.string());
  for (const std::string& path : eval::write_plots(records, (std::filesystem::path(opt.out) / "plots").string()))
    fmt::print("plot: {}\n", path);
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto opt = std::make_shared<DemoOptions>();
  CLI::App* cmd = app.add_subcommand(
      "demo", "compare the full cache and eviction methods on the default model: score, KV memory, speed");
  cmd->add_option("-m,--model", opt->model, "GGUF model")->capture_default_str();
  cmd->add_option("--methods", opt->methods,
                  "methods, comma-separated (as kvslim eval); a bare lookaheadkv takes MODEL.lookahead.gguf")
      ->capture_default_str();
  cmd->add_option("--budgets", opt->budgets, "budgets in tokens per layer and KV head")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--tasks", opt->grid.tasks, "generated tasks")->delimiter(',')->capture_default_str();
  cmd->add_option("--lengths", opt->grid.lengths, "prompt lengths in tokens")->delimiter(',')->capture_default_str();
  cmd->add_option("--samples", opt->grid.samples, "samples per task and length")->capture_default_str();
  cmd->add_option("--out", opt->out, "output directory (its samples.jsonl is replaced)")->capture_default_str();
  cmd->add_option("--threads", opt->threads, "threads (0: all cores)")->capture_default_str();
  add_kv_type_options(*cmd, opt->kv_types);
  cmd->callback([opt] { run_demo(*opt); });
}

}  // namespace kvslim::cli
