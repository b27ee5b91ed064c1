// The sweep: protocols feed the same tokens; one run's record; the grid's order, labels and
// checks; resuming and sharding + merging give the summary of one uninterrupted run. Samples
// come from a fake generator written here (the real ones live in src/tasks/).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <tuple>

#include "eval/protocol.h"
#include "eval/runner.h"
#include "eval/sample_source.h"
#include "eval/sweep.h"
#include "eval/sweep_config.h"
#include "model/model.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim {
namespace {

using namespace eval;
using tasks::TaskInfo;
using tasks::TaskSample;
using tasks::TaskTurn;

// ---- a fake task catalog: "recall" hides a word in filler text; "needle" takes a depth ----

const std::vector<TaskInfo>& fake_tasks() {
  static const std::vector<TaskInfo> tasks = {{"recall", "find the word", 24, false},
                                              {"needle", "at a depth", 32, true}};
  return tasks;
}

const TaskInfo& fake_find(const std::string& name) {
  for (const TaskInfo& t : fake_tasks())
    if (t.name == name) return t;
  fail("unknown task '{}' (valid: recall, needle)", name);
}

TaskSample fake_make(const std::string& task, int64_t length, uint64_t seed, const Tokenizer&,
                     std::optional<double> depth) {
  TaskSample s;
  s.task = task;
  s.target_tokens = length;
  s.seed = seed;
  const std::string word = "w" + std::to_string(seed);
  const size_t filler = size_t(length) - 16;
  const size_t at = size_t(double(filler) * depth.value_or(0.5));
  s.context = std::string(at, 'a') + word + std::string(filler - at, 'b');
  s.question = " word?";
  s.answer_prefix = " ";
  s.answers = {word};
  s.depth = depth.value_or(-1);
  s.max_new_tokens = 3;
  return s;
}

// Scores any output by a rule the tests can recompute from the record's output.
double fake_score(const TaskSample&, const std::string& output) { return double(output.size() % 3) / 2; }
double fake_partial(const TaskSample&, const std::string& output) { return output.empty() ? 0.0 : 1.0; }

TaskCatalog fake_catalog() { return {fake_find, fake_make, fake_score, fake_partial}; }

struct Fixture {
  std::unique_ptr<Model> model = Model::load(testing::make_model(testing::TinyModel{}));
  ThreadPool pool{2};

  GridOptions grid(int samples) const {
    GridOptions g;
    g.tasks = {"recall", "needle"};
    g.lengths = {48};
    g.samples = samples;
    g.seed = 10;
    return g;
  }
  SweepOptions options(const std::string& out) const {
    SweepOptions o;
    o.methods = parse_methods("full,knorm,streaming_llm:sinks=2");
    o.budgets = {8, 16};
    o.runner.engine.page_tokens = 8;
    o.runner.protocol = Protocol::QueryAgnostic;
    o.runner.intrinsic.recall = o.runner.intrinsic.kl = true;
    o.runner.intrinsic.response_tokens = 3;
    o.out_dir = testing::temp_path(out);
    std::filesystem::remove_all(o.out_dir);
    return o;
  }
  SweepOutcome sweep(const GridOptions& g, const SweepOptions& o) {
    return run_sweep(*model, pool, generated_source(g, fake_catalog(), model->tokenizer()), o);
  }
};

// Everything in a summary row but the timings (which differ from run to run).
using Deterministic = std::tuple<std::string, int64_t, std::string, int64_t, int64_t, double, double,
                                 std::optional<double>, std::optional<double>, std::optional<double>>;
std::vector<Deterministic> deterministic(const Summary& s) {
  std::vector<Deterministic> rows;
  for (const SummaryRow& r : s.rows)
    rows.emplace_back(r.method, r.budget, r.task, r.length, r.samples, r.score, r.kv_bytes, r.recall, r.kl,
                      r.ppl_ratio);
  return rows;
}

TEST(EvalProtocol, BothProtocolsFeedTheSameTokens) {
  Fixture f;
  const TaskSample s = fake_make("recall", 40, 1, f.model->tokenizer(), std::nullopt);
  const PromptTokens aware = tokenize_prompt(s, f.model->tokenizer(), Protocol::QueryAware);
  const PromptTokens agnostic = tokenize_prompt(s, f.model->tokenizer(), Protocol::QueryAgnostic);
  EXPECT_TRUE(aware.appended.empty());
  EXPECT_EQ(agnostic.compressed,
            f.model->tokenizer().encode(s.context, f.model->tokenizer().add_bos_by_default(), false));
  EXPECT_EQ(agnostic.appended, f.model->tokenizer().encode(" word? ", false, false));
  std::vector<int32_t> joined = agnostic.compressed;
  joined.insert(joined.end(), agnostic.appended.begin(), agnostic.appended.end());
  EXPECT_EQ(aware.compressed, joined);
  EXPECT_EQ(protocol_from_name("query-agnostic"), Protocol::QueryAgnostic);
  EXPECT_THROW(protocol_from_name("query"), Error);
}

TEST(EvalRunner, RecordHoldsTheRunAndFullAgreesAcrossProtocols) {
  Fixture f;
  const GridOptions g = f.grid(1);
  const SampleSource source = generated_source(g, fake_catalog(), f.model->tokenizer());
  const std::vector<MethodSpec> methods = parse_methods("full,knorm");
  const std::vector<MethodRun> runs = expand_runs(methods, {8});
  RunnerOptions aware, agnostic;
  aware.engine.page_tokens = agnostic.engine.page_tokens = 8;
  agnostic.protocol = Protocol::QueryAgnostic;
  const SampleSpec& spec = source.samples[0];
  PreparedSample a(spec, source.make(spec), f.model->tokenizer(), Protocol::QueryAware);
  PreparedSample b(spec, source.make(spec), f.model->tokenizer(), Protocol::QueryAgnostic);

  const SampleRecord full_a = run_method(*f.model, f.pool, aware, a, runs[0], source);
  const SampleRecord full_b = run_method(*f.model, f.pool, agnostic, b, runs[0], source);
  EXPECT_EQ(full_a.output, full_b.output);  // no eviction: the protocols differ only in blocking
  EXPECT_EQ(full_a.kv_bytes, full_b.kv_bytes);
  EXPECT_EQ(full_a.method, "full");
  EXPECT_EQ(full_a.budget, 0);
  EXPECT_EQ(full_a.task, "recall");
  EXPECT_EQ(full_a.seed, 10u);
  EXPECT_EQ(full_a.protocol, "query-aware");
  EXPECT_EQ(full_b.protocol, "query-agnostic");
  EXPECT_EQ(full_a.n_prompt, a.tokens().size());
  EXPECT_DOUBLE_EQ(full_a.kept_tokens, double(a.tokens().size()));
  EXPECT_EQ(full_a.score, fake_score(a.sample(), full_a.output));
  EXPECT_EQ(full_a.partial, fake_partial(a.sample(), full_a.output));
  EXPECT_FALSE(full_a.recall.has_value());  // not asked

  const SampleRecord knorm = run_method(*f.model, f.pool, aware, a, runs[1], source);
  EXPECT_EQ(knorm.budget, 8);
  EXPECT_DOUBLE_EQ(knorm.kept_tokens, 8);
  EXPECT_LT(knorm.kv_bytes, full_a.kv_bytes);
  EXPECT_GE(knorm.kv_bytes_peak, knorm.kv_bytes);
  EXPECT_GT(knorm.prefill_ms, 0);
}

TEST(EvalSweepConfig, MethodsCarryOptionsAfterAColon) {
  const auto m = parse_methods("snapkv:window=4,kernel=3,h2o,adakv:tova,full");
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].label, "snapkv:window=4,kernel=3");
  EXPECT_EQ(m[0].press, "snapkv");
  EXPECT_EQ(m[0].options, (std::vector<std::string>{"window=4", "kernel=3"}));
  EXPECT_EQ(m[1].label, "h2o");
  EXPECT_EQ(m[2].press, "adakv:tova");  // the registry's own argument
  EXPECT_TRUE(m[2].options.empty());
  EXPECT_TRUE(m[3].is_full());
}

void expect_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    FAIL() << "expected an error mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(EvalSweepConfig, BadListsAreNamed) {
  expect_error([] { parse_methods("snapkv,nope"); }, "valid:");
  expect_error([] { parse_methods("snapkv:nope=1"); }, "nope");
  expect_error([] { parse_methods("knorm,window=3"); }, "follows no method");
  expect_error([] { parse_methods("knorm,,h2o"); }, "empty entry");
  expect_error([] { parse_methods("knorm,knorm"); }, "twice");
  expect_error([] { parse_metrics({"score", "bleu"}); }, "valid: score, recall, attn_error, kl");
  expect_error([] { parse_metrics({}); }, "--metrics is empty");
  const auto methods = parse_methods("knorm");
  expect_error([&] { expand_runs(methods, {}); }, "--budgets is empty");
  expect_error([&] { expand_runs(methods, {8, 0}); }, "> 0");
  expect_error([] { expand_runs(parse_methods("snapkv:window=32"), {16}); }, "window");
  EXPECT_EQ(expand_runs(parse_methods("full"), {}).size(), 1u);  // full needs no budget
}

TEST(EvalSweepConfig, ShardIsIOverN) {
  const Shard s = parse_shard("1/3");
  EXPECT_EQ(s.index, 1);
  EXPECT_EQ(s.count, 3);
  EXPECT_TRUE(s.takes(4));
  EXPECT_FALSE(s.takes(3));
  for (const char* bad : {"3/3", "-1/2", "1/0", "a/2", "1/", "1", "1/2/3", ""})
    expect_error([&] { parse_shard(bad); }, "--shard");
}

TEST(EvalSweepConfig, GridOrderLabelsAndSeeds) {
  GridOptions g;
  g.tasks = {"needle", "recall"};
  g.lengths = {64, 32};
  g.depths = {0, 0.25};
  g.samples = 2;
  g.seed = 100;
  const auto specs = expand_grid(g, fake_find);
  // needle: 2 lengths x 2 depths x 2 samples; recall (no depth): 2 lengths x 2 samples.
  ASSERT_EQ(specs.size(), 12u);
  EXPECT_EQ(specs[0].label, "needle@0");
  EXPECT_EQ(specs[0].length, 64);
  EXPECT_EQ(specs[0].seed, 100u);
  EXPECT_EQ(specs[1].seed, 101u);
  EXPECT_EQ(specs[2].label, "needle@0.25");
  EXPECT_EQ(specs[2].depth, 0.25);
  EXPECT_EQ(specs[4].length, 32);
  EXPECT_EQ(specs[8].label, "recall");
  EXPECT_EQ(specs[8].depth, -1);
}

TEST(EvalSweepConfig, GridErrors) {
  GridOptions g;
  g.tasks = {"recall"};
  g.lengths = {48};
  expect_error(
      [&] {
        auto h = g;
        h.tasks = {"recall", "bogus"};
        expand_grid(h, fake_find);
      },
      "valid: recall, needle");
  expect_error(
      [&] {
        auto h = g;
        h.lengths = {23};
        expand_grid(h, fake_find);
      },
      "below the minimum of task recall (24");
  expect_error(
      [&] {
        auto h = g;
        h.lengths = {};
        expand_grid(h, fake_find);
      },
      "--lengths is empty");
  expect_error(
      [&] {
        auto h = g;
        h.tasks = {};
        expand_grid(h, fake_find);
      },
      "--tasks is empty");
  expect_error(
      [&] {
        auto h = g;
        h.depths = {1.5};
        expand_grid(h, fake_find);
      },
      "outside [0, 1]");
  expect_error(
      [&] {
        auto h = g;
        h.samples = 0;
        expand_grid(h, fake_find);
      },
      "--samples");
}

TEST(EvalSweep, WritesOneRecordPerRunAndTheSummary) {
  Fixture f;
  const SweepOptions o = f.options("sweep-one");
  std::vector<int64_t> seen;
  const SweepOutcome out =
      run_sweep(*f.model, f.pool, generated_source(f.grid(1), fake_catalog(), f.model->tokenizer()), o,
                [&](const SweepProgress& p) { seen.push_back(p.done * 100 + p.total); });
  // 2 samples x (full + 2 methods x 2 budgets)
  EXPECT_EQ(out.ran, 10);
  EXPECT_EQ(out.skipped, 0);
  ASSERT_EQ(seen.size(), 10u);
  EXPECT_EQ(seen.front(), 110);
  EXPECT_EQ(seen.back(), 1010);
  EXPECT_EQ(read_records(o.out_dir + "/samples.jsonl").size(), 10u);
  EXPECT_TRUE(std::filesystem::exists(o.out_dir + "/summary.csv"));
  EXPECT_TRUE(std::filesystem::exists(o.out_dir + "/summary.md"));
  ASSERT_EQ(out.summary.rows.size(), 10u);  // one sample per row here
  for (const SummaryRow& r : out.summary.rows) {
    EXPECT_TRUE(r.recall.has_value());
    if (r.method == "full") {
      EXPECT_EQ(*r.recall, 1.0);
      EXPECT_EQ(*r.kl, 0.0);
    }
  }
}

TEST(EvalSweep, ResumingSkipsFinishedRunsAndGivesTheSameSummary) {
  Fixture f;
  const SweepOptions once = f.options("sweep-once"), resumed = f.options("sweep-resumed");
  const SweepOutcome reference = f.sweep(f.grid(2), once);
  EXPECT_EQ(reference.ran, 20);
  EXPECT_EQ(f.sweep(f.grid(1), resumed).ran, 10);
  const SweepOutcome second = f.sweep(f.grid(2), resumed);
  EXPECT_EQ(second.ran, 10);
  EXPECT_EQ(second.skipped, 10);
  EXPECT_EQ(deterministic(second.summary), deterministic(reference.summary));
  const SweepOutcome third = f.sweep(f.grid(2), resumed);
  EXPECT_EQ(third.ran, 0);
  EXPECT_EQ(third.skipped, 20);
  EXPECT_EQ(read_records(resumed.out_dir + "/samples.jsonl").size(), 20u);
}

TEST(EvalSweep, ShardsMergeIntoTheSummaryOfOneRun) {
  Fixture f;
  const SweepOptions once = f.options("shard-once");
  const SweepOutcome reference = f.sweep(f.grid(2), once);
  std::vector<std::string> dirs;
  int64_t ran = 0;
  for (int i = 0; i < 3; ++i) {
    SweepOptions shard = f.options("shard-" + std::to_string(i));
    shard.shard = {i, 3};
    ran += f.sweep(f.grid(2), shard).ran;
    dirs.push_back(shard.out_dir);
  }
  EXPECT_EQ(ran, reference.ran);  // the shards partition the runs
  const std::string merged = testing::temp_path("shard-merged");
  std::filesystem::remove_all(merged);
  dirs.push_back(dirs[0]);  // a directory given twice adds nothing
  const Summary summary = merge_directories(merged, dirs);
  EXPECT_EQ(deterministic(summary), deterministic(reference.summary));
  EXPECT_EQ(read_records(merged + "/samples.jsonl").size(), 20u);
  // Merging again into the same directory changes nothing.
  EXPECT_EQ(deterministic(merge_directories(merged, {dirs[1]})), deterministic(reference.summary));
  EXPECT_EQ(read_records(merged + "/samples.jsonl").size(), 20u);
}

TEST(EvalSweep, UnwritableOutputFailsBeforeAnyRun) {
  Fixture f;
  SweepOptions o = f.options("unused");
  const std::string file = testing::temp_path("not-a-directory");
  std::ofstream(file) << "x";
  o.out_dir = file + "/out";
  int runs = 0;
  expect_error(
      [&] {
        run_sweep(*f.model, f.pool, generated_source(f.grid(1), fake_catalog(), f.model->tokenizer()), o,
                  [&](const SweepProgress&) { ++runs; });
      },
      "cannot create the output directory");
  EXPECT_EQ(runs, 0);
}

TEST(EvalLongBench, SamplesKeepTheirLineDatasetAndLengthBucket) {
  std::vector<LongBenchSample> samples(3);
  const int64_t words[] = {3999, 4000, 9000};
  for (int i = 0; i < 3; ++i) {
    samples[i].dataset = i == 2 ? "trec" : "hotpotqa";
    samples[i].context = "Paris is in France.";
    samples[i].input = "Where is Paris?";
    samples[i].answers = {"France"};
    samples[i].length = words[i];
    samples[i].line = 2 * i + 1;  // lines 2, 4 were malformed
  }
  samples[2].all_classes = {"France", "Spain"};
  const SampleSource source = longbench_source(samples);
  ASSERT_EQ(source.samples.size(), 3u);
  EXPECT_EQ(source.samples[0].label, "hotpotqa");
  EXPECT_EQ(source.samples[0].seed, 1u);
  EXPECT_EQ(source.samples[2].seed, 5u);
  EXPECT_EQ(source.samples[0].length, 0);
  EXPECT_EQ(source.samples[1].length, 4000);
  EXPECT_EQ(source.samples[2].length, 8000);
  const TaskSample t = source.make(source.samples[2]);
  EXPECT_EQ(t.context + t.question, "Paris is in France.\n\nWhere is Paris?\nAnswer:");
  EXPECT_EQ(t.max_new_tokens, 64);  // trec's
  EXPECT_EQ(source.score(t, " France").score, 1.0);
  EXPECT_EQ(source.score(source.make(source.samples[0]), "Spain").score, 0.0);
  expect_error([] { longbench_source({}); }, "no sample");
}

TEST(EvalSweep, MergeRefusesAMissingInput) {
  expect_error([] { merge_directories(testing::temp_path("merge-out"), {testing::temp_path("no-such-dir")}); },
               "no samples.jsonl");
}

}  // namespace
}  // namespace kvslim
