// kvslim claims: do the seed papers' headline comparisons hold on our model? Runs the five sweeps
// of eval/claims.h on held-out samples (resumable: OUT keeps every run), then prints one table of
// claims with our figures, the paired 95% interval and the verdict, and writes OUT/claims.md.
// With --shard i/n it runs only the samples whose index is i mod n of every sweep (no table);
// --merge DIR... joins such shards' sweeps into OUT first, then goes on as a plain run (which
// finds every run done) to the table.
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "cli/commands.h"
#include "cli/progress.h"
#include "eval/claims.h"
#include "eval/results.h"
#include "eval/sample_source.h"
#include "model/lookahead_adapter.h"
#include "model/model.h"
#include "util/error.h"

namespace kvslim::cli {

namespace {

constexpr const char* kDefaultModel = "models/kvslim-4k.gguf";

struct ClaimsOptions {
  std::string model = kDefaultModel;
  std::string adapter;  // default: MODEL's .lookahead.gguf beside it, when it exists
  bool quick = false;
  std::string out = "claims-out";
  int threads = 0;
  int samples = 0;                 // 0: the plan's
  std::string shard;               // "i/n"; empty: every sample
  std::vector<std::string> merge;  // shard directories to merge into OUT first
};

void run_claims(const ClaimsOptions& opt) {
  const auto start = std::chrono::steady_clock::now();
  if (!opt.shard.empty() && !opt.merge.empty())
    fail("--shard runs one shard and --merge joins finished ones: give one or the other");
  const eval::Shard shard = opt.shard.empty() ? eval::Shard{} : eval::parse_shard(opt.shard);
  for (const std::string& dir : opt.merge) {
    if (!std::filesystem::is_directory(dir)) fail("--merge {}: no such directory", dir);
    if (std::filesystem::exists(opt.out) && std::filesystem::equivalent(dir, opt.out))
      fail("--merge {}: the same directory as --out", dir);
  }
  if (!std::filesystem::exists(opt.model))
    fail("model {} not found{}", opt.model,
         opt.model == kDefaultModel ? " (run from the repository root, or pass -m MODEL)" : "");
  const std::string adapter = opt.adapter.empty() ? adapter_beside(opt.model) : opt.adapter;
  if (!adapter.empty() && !std::filesystem::exists(adapter)) fail("--adapter {}: no such file", adapter);
  const auto model = Model::load(opt.model);
  eval::ClaimsPlan plan = eval::claims_plan(opt.quick, adapter);
  if (opt.samples > 0) {
    plan.samples = opt.samples;
    plan.mt_samples = 2 * opt.samples;
  }
  // Prompt lengths the model's context cannot hold with room for the answer are left out, said
  // in a note (the full run's 4096 on a 2K model).
  constexpr int64_t kAnswerRoom = 128;
  const int64_t context = model->config().context_length;
  std::vector<int64_t> fitting;
  for (const int64_t length : plan.lengths)
    if (length + kAnswerRoom <= context) fitting.push_back(length);
  if (fitting.empty()) fail("claims: the model's context ({}) holds none of the prompt lengths", context);
  for (const int64_t length : plan.lengths)
    if (length + kAnswerRoom > context)
      fmt::print(stderr, "claims: {}-token prompts left out: the model's context is {}\n", length, context);
  plan.lengths = fitting;
  std::vector<eval::ClaimsSweep> sweeps = eval::claims_sweeps(plan, opt.out);
  for (eval::ClaimsSweep& s : sweeps) s.options.shard = shard;

  // Each sweep's records from every shard directory, duplicates dropped, into OUT/SWEEP.
  if (!opt.merge.empty()) {
    for (const eval::ClaimsSweep& s : sweeps) {
      std::vector<std::string> inputs;
      for (const std::string& dir : opt.merge) {
        const std::filesystem::path sub = std::filesystem::path(dir) / s.dir;
        if (!std::filesystem::exists(sub / "samples.jsonl"))
          fail("--merge {}: no {}/samples.jsonl (not a finished `claims --shard` output?)", dir, s.dir);
        inputs.push_back(sub.string());
      }
      const eval::Summary merged = eval::merge_directories(s.options.out_dir, inputs);
      fmt::print(stderr, "merged {} shard directories into {} ({} summary rows)\n", inputs.size(), s.options.out_dir,
                 merged.rows.size());
    }
  }

  ThreadPool pool(opt.threads);
  const eval::TaskCatalog catalog = eval::generated_tasks();
  fmt::print("kvslim claims{}{}: {}; tasks {} at {} tokens, {} held-out samples each ({} multi-turn {}); budgets {}\n",
             opt.quick ? " --quick" : "", opt.shard.empty() ? "" : " --shard " + opt.shard, opt.model,
             fmt::join(plan.tasks, ","), fmt::join(plan.lengths, ","), plan.samples, plan.mt_samples, plan.mt_task,
             fmt::join(plan.budgets, ","));
  std::vector<std::vector<eval::SampleRecord>> records;
  int64_t ran = 0, skipped = 0;
  for (const eval::ClaimsSweep& s : sweeps) {
    fmt::print(stderr, "sweep {} ({} methods)\n", s.dir, s.options.methods.size());
    const eval::SampleSource source = eval::generated_source(s.grid, catalog, model->tokenizer());
    Progress progress;
    const eval::SweepOutcome outcome = eval::run_sweep(*model, pool, source, s.options, std::ref(progress));
    progress.finish();
    ran += outcome.ran;
    skipped += outcome.skipped;
    records.push_back(eval::read_records((std::filesystem::path(s.options.out_dir) / "samples.jsonl").string()));
  }
  if (!opt.shard.empty()) {
    fmt::print(
        "claims shard {}: {} runs done, {} already in {}; no table for one shard: merge the shards with "
        "`kvslim claims --merge DIR... --out OUT` and the same options\n",
        opt.shard, ran, skipped, opt.out);
    return;
  }
  if (!opt.merge.empty() && ran > 0)
    fmt::print(stderr, "claims: {} runs were missing from the merged shards and ran here\n", ran);

  const eval::ClaimsRecords by_sweep{records.at(0), records.at(1), records.at(2), records.at(3), records.at(4)};
  const std::string table = eval::claims_markdown(eval::claim_rows(plan, by_sweep));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("\n{}\nverdict: paired 95% t-interval of the per-sample difference (docs/claims.md); {}\n", table,
             format_duration(seconds));
  const std::filesystem::path md = std::filesystem::path(opt.out) / "claims.md";
  const std::filesystem::path partial = md.string() + ".partial";
  {
    std::ofstream f(partial);
    f << table;
    if (!f) fail("cannot write {}", partial.string());
  }
  std::filesystem::rename(partial, md);
  fmt::print("table: {}; every run: {}/*/samples.jsonl\n", md.string(), opt.out);
}

}  // namespace

void add_claims_command(CLI::App& app) {
  auto opt = std::make_shared<ClaimsOptions>();
  CLI::App* cmd =
      app.add_subcommand("claims", "do the seed papers' claims hold on this model? one table, with intervals");
  cmd->add_flag("--quick", opt->quick,
                "1024 tokens only (the full run adds 2048 and 4096): about 90 s on 2 cores with the default model");
  cmd->add_option("-m,--model", opt->model, "GGUF model")->capture_default_str();
  cmd->add_option("--adapter", opt->adapter, "LookaheadKV adapter (default: MODEL's .lookahead.gguf, if present)");
  cmd->add_option("--out", opt->out, "output directory (runs already in it are kept and skipped)")
      ->capture_default_str();
  cmd->add_option("--threads", opt->threads, "threads (0: all cores)")->capture_default_str();
  cmd->add_option("--samples", opt->samples,
                  "held-out samples per task and length (default 8; multi-turn: twice as many); fewer: a smoke run")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--shard", opt->shard, "run only the samples whose index is i mod n in every sweep (i/n); no table");
  cmd->add_option("--merge", opt->merge, "shard output directories to merge into --out first, then the table")
      ->expected(1, -1);
  cmd->callback([opt] { run_claims(*opt); });
}

}  // namespace kvslim::cli
