// `kvslim eval`, `eval-merge` and `plot` end to end on a tiny random model: the output files and
// their columns, resuming, shards merged into the summary of one run, charts written, and
// one-line errors for every bad request before any work.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli_helpers.h"
#include "test_models.h"

namespace kvslim {
namespace {

using testing::CommandResult;
using testing::expect_clean_error;
using testing::run;

std::string tiny_model() { return testing::make_model(testing::TinyModel{}); }

std::string fresh_dir(const std::string& name) {
  const std::string dir = testing::temp_path(name);
  std::filesystem::remove_all(dir);
  return dir;
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// summary.csv without the timing columns (prefill_ms, score_ms, decode_ms: fields 8 to 10),
// which differ from run to run. The method names here hold no commas.
std::vector<std::string> without_timings(const std::string& csv_path) {
  std::vector<std::string> rows;
  for (const std::string& line : lines_of(csv_path)) {
    std::vector<std::string> fields;
    std::stringstream in(line);
    for (std::string f; std::getline(in, f, ',');) fields.push_back(f);
    if (fields.size() >= 10) fields.erase(fields.begin() + 7, fields.begin() + 10);
    std::string joined;
    for (const std::string& f : fields) joined += f + ",";
    rows.push_back(joined);
  }
  return rows;
}

// passkey at its minimum length keeps the model's work small.
std::string sweep_args(const std::string& out) {
  return "eval -m " + tiny_model() +
         " --methods full,knorm,streaming_llm --budgets 16,64 --tasks passkey --lengths 256 --samples 2 --seed 3"
         " --metrics score,recall,kl --response-tokens 4 --threads 2 --out " +
         out;
}

TEST(CliEval, WritesSamplesAndTheSummaryAndResumes) {
  const std::string out = fresh_dir("cli-eval");
  const CommandResult r = run(sweep_args(out));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto samples = lines_of(out + "/samples.jsonl");
  EXPECT_EQ(samples.size(), 10u);  // 2 samples x (full + 2 methods x 2 budgets)
  const auto summary = lines_of(out + "/summary.csv");
  ASSERT_EQ(summary.size(), 6u);
  EXPECT_EQ(summary[0],
            "method,budget,task,length,samples,score,kv_bytes,prefill_ms,score_ms,decode_ms,storage_tokens,traffic_"
            "tokens,recall,kl,ppl_ratio");
  EXPECT_EQ(summary[1].rfind("full,0,passkey,256,2,", 0), 0u) << summary[1];
  EXPECT_EQ(summary[2].rfind("knorm,16,passkey,256,2,", 0), 0u) << summary[2];
  const auto md = lines_of(out + "/summary.md");
  EXPECT_EQ(md.size(), 7u);  // header, rule, 5 rows
  EXPECT_EQ(r.out, [&] {
    std::ifstream in(out + "/summary.md");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }());
  // stderr is no terminal here: one line per finished run, then the closing line.
  EXPECT_NE(r.err.find("[1/10] full passkey 256 seed 3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[10/10]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ETA"), std::string::npos) << r.err;

  const std::vector<std::string> first = without_timings(out + "/summary.csv");
  std::filesystem::remove(out + "/summary.csv");
  const CommandResult again = run(sweep_args(out));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("0 runs done, 10 already in"), std::string::npos) << again.err;
  EXPECT_EQ(lines_of(out + "/samples.jsonl").size(), 10u);
  EXPECT_EQ(without_timings(out + "/summary.csv"), first);  // rebuilt from the file
}

TEST(CliEval, ShardsMergeIntoTheSummaryOfOneRun) {
  const std::string whole = fresh_dir("cli-whole"), a = fresh_dir("cli-shard-a"), b = fresh_dir("cli-shard-b"),
                    merged = fresh_dir("cli-merged");
  ASSERT_EQ(run(sweep_args(whole)).exit_code, 0);
  ASSERT_EQ(run(sweep_args(a) + " --shard 0/2").exit_code, 0);
  ASSERT_EQ(run(sweep_args(b) + " --shard 1/2").exit_code, 0);
  EXPECT_EQ(lines_of(a + "/samples.jsonl").size(), 5u);
  EXPECT_EQ(lines_of(b + "/samples.jsonl").size(), 5u);
  const CommandResult r = run("eval-merge " + merged + " " + a + " " + b + " " + a);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_of(merged + "/samples.jsonl").size(), 10u);
  EXPECT_EQ(without_timings(merged + "/summary.csv"), without_timings(whole + "/summary.csv"));
}

TEST(CliEval, NiahGridAndPlots) {
  const std::string out = fresh_dir("cli-niah");
  const CommandResult r = run("eval -m " + tiny_model() +
                              " --methods full,snapkv:window=8 --budgets 32 --tasks passkey --lengths 256,300"
                              " --depths 0,1 --samples 1 --protocol query-agnostic --threads 2 --out " +
                              out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto summary = lines_of(out + "/summary.csv");
  ASSERT_EQ(summary.size(), 9u);  // 2 lengths x 2 depths x 2 methods
  EXPECT_EQ(summary[1].rfind("full,0,passkey@0,256,1,", 0), 0u) << summary[1];
  EXPECT_EQ(summary[2].rfind("snapkv:window=8,32,passkey@0,256,1,", 0), 0u) << summary[2];

  const CommandResult plot = run("plot " + out + " -o " + out + "/charts");
  ASSERT_EQ(plot.exit_code, 0) << plot.err;
  for (const char* name : {"score_vs_budget_passkey_256.svg", "score_vs_budget_passkey_300.svg",
                           "niah_passkey_full_b0.svg", "niah_passkey_snapkv_window_8_b32.svg", "memory_vs_score.svg"}) {
    const std::string path = out + "/charts/" + name;
    EXPECT_TRUE(std::filesystem::exists(path)) << path;
    EXPECT_NE(plot.out.find(path), std::string::npos) << plot.out;
  }
}

TEST(CliEval, BadRequestsAreOneLineErrors) {
  const std::string m = " -m " + tiny_model();
  const std::string base = "eval" + m + " --methods full,knorm --budgets 16 --out " + fresh_dir("cli-bad");
  expect_clean_error(run(base + " --tasks nope --lengths 256"), "valid: niah_single_1");
  expect_clean_error(run(base + " --tasks passkey --lengths 100"), "below the minimum of task passkey");
  expect_clean_error(run(base + " --tasks passkey --lengths 256 --metrics score,bleu"), "unknown metric 'bleu'");
  expect_clean_error(run(base + " --tasks passkey --lengths 256 --shard 2/2"), "--shard '2/2'");
  expect_clean_error(run(base + " --tasks passkey --lengths 256 --shard x"), "--shard 'x'");
  expect_clean_error(run(base + " --tasks passkey --lengths 256 --protocol both"), "unknown protocol");
  expect_clean_error(run(base + " --tasks passkey --lengths 256 --depths 2"), "outside [0, 1]");
  expect_clean_error(run("eval" + m + " --methods full,nope --tasks passkey --lengths 256"), "unknown method 'nope'");
  expect_clean_error(run("eval" + m + " --methods knorm --tasks passkey --lengths 256"), "--budgets is empty");
  const std::string file = testing::temp_path("cli-a-file");
  std::ofstream(file) << "x";
  expect_clean_error(run("eval" + m + " --methods full --tasks passkey --lengths 256 --out " + file + "/out"),
                     "cannot create the output directory");
  expect_clean_error(run("plot " + fresh_dir("cli-empty")), "has no samples.jsonl");
  expect_clean_error(run("eval-merge " + fresh_dir("cli-merge-out") + " " + fresh_dir("cli-missing")),
                     "has no samples.jsonl");
}

TEST(CliEval, MalformedResultsLineIsReportedWithItsNumber) {
  const std::string dir = fresh_dir("cli-malformed");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/samples.jsonl") << "{}\n";
  expect_clean_error(run("plot " + dir), "samples.jsonl line 1");
}

TEST(CliEval, LongBenchFileRunsPastAMalformedLine) {
  const std::string out = fresh_dir("cli-longbench");
  std::filesystem::create_directories(out);
  const std::string data = out + "/data.jsonl";
  std::ofstream(data) << R"({"dataset": "hotpotqa", "context": "Paris is in France. )" << std::string(300, 'x')
                      << R"(", "input": "Where is Paris?", "answers": ["France"], "length": 5000, "all_classes": null})"
                      << "\n"
                      << "{broken\n"
                      << R"({"dataset": "trec", "context": "a b c", "input": "Type?", "answers": ["LOC"], "length": 3,)"
                      << R"( "all_classes": ["LOC", "HUM"]})"
                      << "\n";
  const CommandResult r = run("eval -m " + tiny_model() + " --methods full,knorm --budgets 16 --data " + data +
                              " --threads 2 --out " + out + "/results");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("line 2"), std::string::npos) << r.err;
  const auto summary = lines_of(out + "/results/summary.csv");
  ASSERT_EQ(summary.size(), 5u);
  EXPECT_EQ(summary[1].rfind("full,0,hotpotqa,4000,1,", 0), 0u) << summary[1];
  EXPECT_EQ(summary[3].rfind("full,0,trec,0,1,", 0), 0u) << summary[3];
  expect_clean_error(
      run("eval -m " + tiny_model() + " --methods full --data " + data + " --tasks vt --out " + out + "/x"),
      "--data replaces");
  expect_clean_error(
      run("eval -m " + tiny_model() + " --methods full --data " + out + "/absent.jsonl --out " + out + "/x"),
      "absent.jsonl");
}

TEST(CliEval, SubcommandsHaveHelp) {
  for (const char* sub : {"eval", "eval-merge", "plot"}) {
    const CommandResult r = run(std::string(sub) + " --help");
    EXPECT_EQ(r.exit_code, 0) << sub;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << sub;
  }
}

}  // namespace
}  // namespace kvslim

namespace kvslim {
namespace {

// kvslim demo on a tiny model: the table has full first and every method at every budget, the
// directory holds the runs and the charts, and a second demo replaces the runs instead of
// skipping them.
TEST(CliDemo, PrintsTheTableAndWritesRunsAndPlots) {
  const std::string out = fresh_dir("cli-demo");
  const std::string args =
      "demo -m " + tiny_model() +
      " --methods full,snapkv:window=8,knorm --budgets 16,32 --tasks passkey --lengths 256 --samples 1"
      " --threads 2 --out " +
      out;
  for (int round = 0; round < 2; ++round) {
    const CommandResult r = run(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("| method | budget | runs | score | KV MiB | KV vs full | prefill tok/s | decode tok/s |"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("| full | - | 1 |"), std::string::npos) << r.out;
    for (const char* row :
         {"| snapkv:window=8 | 16 | 1 |", "| snapkv:window=8 | 32 | 1 |", "| knorm | 16 | 1 |", "| knorm | 32 | 1 |"})
      EXPECT_NE(r.out.find(row), std::string::npos) << row;
    EXPECT_EQ(lines_of(out + "/samples.jsonl").size(), 5u);  // replaced, not appended to
    EXPECT_TRUE(std::filesystem::exists(out + "/plots/memory_vs_score.svg"));
  }
}

// A bare `lookaheadkv` runs with MODEL.lookahead.gguf beside the model (as `claims` does), labelled
// `lookaheadkv`; without that file a list naming it is refused, naming the file.
TEST(CliDemo, LookaheadKvTakesTheAdapterBesideTheModel) {
  const std::string dir = fresh_dir("cli-demo-adapter");
  const std::string model = dir + "/m.gguf";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(tiny_model(), model);
  const std::string args =
      "demo -m " + model +
      " --methods full,lookaheadkv --budgets 16 --tasks passkey --lengths 256 --samples 1 --threads 2"
      " --out " +
      dir + "/out";
  expect_clean_error(run(args), dir + "/m.lookahead.gguf does not exist");
  const CommandResult init =
      run("init-adapter -m " + model + " -o " + dir + "/m.lookahead.gguf --lookahead 8 --rank 4");
  ASSERT_EQ(init.exit_code, 0) << init.err;
  const CommandResult r = run(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| lookaheadkv | 16 | 1 |"), std::string::npos) << r.out;
}

TEST(CliDemo, AMissingModelIsAClearError) {
  expect_clean_error(run("demo -m /nonexistent/model.gguf"), "model /nonexistent/model.gguf not found");
  expect_clean_error(run("demo -m " + tiny_model() + " --methods nosuch"), "nosuch");
}

TEST(CliClaims, PromptLengthsTheContextCannotHoldAreRefused) {
  const std::string model = testing::temp_path("claims-ctx512.gguf");
  const CommandResult init =
      run("init-model --layers 1 --dim 32 --heads 2 --kv-heads 1 --ffn 32 --ctx 512 -o " + model);
  ASSERT_EQ(init.exit_code, 0) << init.err;
  // --quick asks for 1024-token prompts only: nothing fits a 512-token context.
  expect_clean_error(run("claims -m " + model + " --quick --out " + testing::temp_path("claims-ctx512")),
                     "the model's context (512) holds none of the prompt lengths");
}

}  // namespace
}  // namespace kvslim
