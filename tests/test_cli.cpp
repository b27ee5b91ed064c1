// The `kvslim` command end to end: outputs of each subcommand and one-line errors on bad input.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <set>

#include "cli_helpers.h"
#include "test_models.h"

namespace kvslim {
namespace {

using testing::CommandResult;
using testing::expect_clean_error;
using testing::run;

std::string tiny_model() { return testing::make_model(testing::TinyModel{}); }

TEST(Cli, GenerateJsonHasEveryField) {
  const CommandResult r = run("generate -m " + tiny_model() + " -p 'the cat' -n 5 --temp 0 --json --threads 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"text", "n_prompt", "n_generated", "prefill_ms", "decode_ms", "prefill_tok_s", "decode_tok_s",
                          "kv_bytes_peak", "kv_bytes_final", "token_ids"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_LE(j["n_generated"].get<int>(), 5);
  EXPECT_EQ(j["token_ids"].size(), j["n_generated"].get<size_t>());
  EXPECT_GT(j["kv_bytes_peak"].get<uint64_t>(), 0u);
}

TEST(Cli, GenerateIsDeterministicForASeed) {
  const std::string args = "generate -m " + tiny_model() + " -p 'the cat' -n 8 --temp 1.5 --seed 9 --json";
  const auto a = nlohmann::json::parse(run(args).out), b = nlohmann::json::parse(run(args).out);
  EXPECT_EQ(a["token_ids"], b["token_ids"]);
}

TEST(Cli, TokenizePrintsIdsOnOneLine) {
  const CommandResult r = run("tokenize -m " + testing::tiny_vocab() + " -p 'the cat' --bos");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("1 ", 0), 0u) << r.out;  // BOS first
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1);
}

TEST(Cli, InfoJsonDescribesTheModel) {
  const CommandResult r = run("info " + tiny_model() + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["architecture"], "llama");
  EXPECT_EQ(j["layers"], 2);
  EXPECT_EQ(j["kv_bytes_per_token"], 2 * 2 * 2 * 16 * 4);  // layers * (K,V) * kv_heads * head_dim * 4 bytes
  EXPECT_EQ(j["kv_bytes_per_token_by_type"]["f16"], 2 * 2 * 2 * 16 * 2);
  EXPECT_EQ(j["kv_bytes_per_token_by_type"]["bf16"], 2 * 2 * 2 * 16 * 2);
  EXPECT_FALSE(j["kv_bytes_per_token_by_type"].contains("q8_0"));  // head_dim 16: no whole q8_0 blocks
}

TEST(Cli, InfoJsonNamesExpertsWindowsAndSinks) {
  testing::TinyModel m;
  m.arch = Arch::GptOss;
  m.layers = 4;
  m.window = 5;
  m.experts = 8;
  m.experts_used = 2;
  const CommandResult r = run("info " + testing::make_model(m) + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["architecture"], "gpt-oss");
  EXPECT_EQ(j["experts"], 8);
  EXPECT_EQ(j["experts_used"], 2);
  EXPECT_EQ(j["sliding_window"], 5);
  EXPECT_EQ(j["sliding_layers"], 2);  // the even ones
  EXPECT_EQ(j["attention_sinks"], true);
  // KV per token of context: the two layers without a window; the window layers hold 2 x 5 tokens.
  const uint64_t layer_token = uint64_t(j["kv_heads"].get<int>()) * 2 * j["head_dim"].get<int>() * 4;
  EXPECT_EQ(j["kv_bytes_per_token"], 2 * layer_token);
  EXPECT_EQ(j["kv_bytes_windows"], 2 * 5 * layer_token);
  EXPECT_EQ(j["kv_bytes_windows_by_type"]["f16"], 2 * 5 * layer_token / 2);
  // A decoded token reads 2 of the 8 experts of each layer: well under the whole file.
  EXPECT_LT(j["active_weight_bytes_per_token"].get<uint64_t>(), j["weight_bytes"].get<uint64_t>() / 2);
  // A dense model has none of these keys.
  const auto dense = nlohmann::json::parse(run("info " + tiny_model() + " --json").out);
  EXPECT_FALSE(dense.contains("experts"));
  EXPECT_FALSE(dense.contains("sliding_window"));
  EXPECT_FALSE(dense.contains("kv_bytes_windows"));
}

TEST(Cli, BenchJsonReportsMedians) {
  const CommandResult r =
      run("bench -m " + tiny_model() + " --prompt-lengths 16,32 --context-lengths 16 --reps 3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["prefill"].size(), 2u);
  ASSERT_EQ(j["decode"].size(), 1u);
  const auto& s = j["prefill"][0]["tok_s"];
  EXPECT_LE(s["min"].get<double>(), s["median"].get<double>());
  EXPECT_LE(s["median"].get<double>(), s["max"].get<double>());
  // The level and the kernels for every weight type and, for the model's head size, KV page type.
  const auto& sys = j["system"];
  EXPECT_FALSE(sys["isa"].get<std::string>().empty());
  EXPECT_FALSE(sys["weight_kernels"]["q4_k"]["prefill"].get<std::string>().empty());
  for (const char* kv : {"f32", "f16", "bf16", "q8_0"})
    EXPECT_FALSE(sys["kv_kernels"][kv].get<std::string>().empty()) << kv;
  EXPECT_FALSE(sys["attention_prefill_kernel"].get<std::string>().empty());
}

TEST(Cli, MissingModelFileIsOneClearLine) {
  expect_clean_error(run("generate -m /nonexistent/model.gguf -p hi"), "/nonexistent/model.gguf");
}

TEST(Cli, CorruptModelFileIsOneClearLine) {
  const std::string path = testing::temp_path("corrupt.gguf");
  std::ofstream(path) << "GGUF this is not a model";
  expect_clean_error(run("info " + path), "corrupt.gguf");
}

TEST(Cli, PromptLongerThanContextIsRefused) {
  expect_clean_error(run("generate -m " + tiny_model() + " -p 'the cat the cat the cat' --ctx 4"), "context");
}

TEST(Cli, UnknownArchitectureAndTypeAreRefused) {
  const std::string common = " --vocab-from " + testing::tiny_vocab() + " -o " + testing::temp_path("x.gguf");
  expect_clean_error(run("init-model --arch gpt5" + common), "gpt5");
  expect_clean_error(run("init-model --type iq2_xxs" + common), "iq2_xxs");
}

TEST(Cli, BadNumbersAreRefused) {
  expect_clean_error(run("generate -m " + tiny_model() + " -p hi --batch 0"), "--batch");
  expect_clean_error(run("generate -m " + tiny_model() + " -p hi --top-p 2"), "--top-p");
  expect_clean_error(run("bench -m " + tiny_model() + " --reps 0"), "--reps");
}

TEST(Cli, GenerateWithAPressReportsItsBudgetAndKeptTokens) {
  const CommandResult r = run("generate -m " + tiny_model() +
                              " -p 'the cat the cat the cat the cat the cat' -n 3 --temp 0 --json --press snapkv"
                              " --budget 8 --press-opt window=4 --kv-page 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["press"], "snapkv");
  EXPECT_EQ(j["budget"], 8);
  EXPECT_LE(j["kept_tokens"].get<double>(), 8.0);
  EXPECT_TRUE(j.contains("score_ms"));
}

TEST(Cli, PressesListsEveryMethodWithOptions) {
  const CommandResult r = run("presses --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::set<std::string> names;
  for (const auto& p : j) names.insert(p["name"].get<std::string>());
  for (const char* name : {"full", "random", "streaming_llm", "h2o", "tova", "knorm", "snapkv", "pyramidkv", "adakv",
                           "keydiff", "lagkv", "dapq", "laq", "rocketkv", "quest", "sparq", "exact_topk"})
    EXPECT_TRUE(names.count(name)) << name;
}

TEST(Cli, InspectWritesKeptPositionsPerLayerAndHead) {
  const std::string out = testing::temp_path("kept.json");
  const CommandResult r = run("inspect -m " + tiny_model() +
                              " -p 'the cat the cat the cat the cat' --press knorm --budget 5 --scores -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(out);
  const auto j = nlohmann::json::parse(in);
  ASSERT_EQ(j["layers"].size(), 2u);
  for (const auto& layer : j["layers"]) {
    ASSERT_EQ(layer.size(), 2u);  // KV heads
    for (const auto& head : layer) {
      EXPECT_EQ(head["positions"].size(), 5u);
      EXPECT_EQ(head["scores"].size(), j["n_prompt"].get<size_t>());
    }
  }
}

TEST(Cli, BadCompressionRequestsAreRefusedBeforeAnyWork) {
  const std::string gen = "generate -m " + tiny_model() + " -p 'the cat' -n 2";
  expect_clean_error(run(gen + " --press snapkvv"), "valid:");
  expect_clean_error(run(gen + " --press snapkv --budget 0"), "--budget");
  expect_clean_error(run(gen + " --press snapkv --budget -1"), "--budget");
  expect_clean_error(run(gen + " --press snapkv --ratio 1.5"), "--ratio");
  expect_clean_error(run(gen + " --press snapkv --budget 16"), "window");
  expect_clean_error(run(gen + " --press lagkv --press-opt lag=0"), "lag");
  expect_clean_error(run(gen + " --press quest --budget 64 --press-opt page=0"), "page");
  expect_clean_error(run(gen + " --press snapkv --press-opt nope=1"), "window");
}

TEST(Cli, MissingPromptIsRefused) { expect_clean_error(run("generate -m " + tiny_model()), "-p"); }

TEST(Cli, InitAdapterWritesAnAdapterGenerateUses) {
  const std::string adapter = testing::temp_path("cli-adapter.gguf");
  const CommandResult init = run("init-adapter -m " + tiny_model() + " -o " + adapter + " --lookahead 8 --rank 4");
  ASSERT_EQ(init.exit_code, 0) << init.err;
  const std::string gen = "generate -m " + tiny_model() +
                          " -p 'the cat sat on the mat and the dog sat on the log' -n 3 "
                          "--temp 0 --json --press lookaheadkv --budget 8";
  const CommandResult r = run(gen + " --press-opt adapter=" + adapter);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["kept_tokens"].get<double>(), 8.0);
  expect_clean_error(run(gen), "lookahead.gguf does not exist");  // none beside the model either
  testing::TinyModel other;
  other.seed = 99;
  expect_clean_error(run("generate -m " + testing::make_model(other) +
                         " -p 'the cat sat' -n 1 --press lookaheadkv "
                         "--budget 2 --press-opt adapter=" +
                         adapter),
                     "fingerprint");
  expect_clean_error(run("init-adapter -m " + tiny_model() + " -o " + adapter + " --rank 0"), "--rank");
}

TEST(Cli, TrainLookaheadWritesAnAdapterAndReportsHeldOutQuality) {
  const std::string adapter = testing::temp_path("cli-trained-adapter.gguf");
  const std::string args = "train-lookahead -m " + tiny_model() + " -o " + adapter +
                           " --lookahead 4 --rank 2 --samples 2 --heldout 1 --batch 1 --min-tokens 64"
                           " --max-tokens 80 --response-tokens 4 --recall-budget 8 --threads 2";
  const CommandResult r = run(args + " --steps 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("held-out KL"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("SnapKV"), std::string::npos) << r.err;
  const CommandResult gen = run("generate -m " + tiny_model() +
                                " -p 'the cat sat on the mat' -n 2 --temp 0 --json "
                                "--press lookaheadkv --budget 4 --press-opt adapter=" +
                                adapter);
  EXPECT_EQ(gen.exit_code, 0) << gen.err;
  expect_clean_error(run(args + " --steps 0"), "--steps");
}

TEST(Cli, EverySubcommandHasHelp) {
  for (const char* sub : {"info", "tokenize", "generate", "init-model", "bench", "train-tokenizer"}) {
    const CommandResult r = run(std::string(sub) + " --help");
    EXPECT_EQ(r.exit_code, 0) << sub;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << sub;
  }
}

std::string write_text(const std::string& name, const std::string& text) {
  const std::string path = testing::temp_path(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(Cli, TrainTokenizerWritesAVocabularyThatTokenizeAndInitModelLoad) {
  std::string a, b;
  for (int i = 0; i < 50; ++i) {
    a += "One of the special magic numbers for apple is: " + std::to_string(1000000 + 7919 * i) + ".\n";
    b += "The grass is green. The sky is blue. The pass key is " + std::to_string(10000 + 31 * i) + ".\n";
  }
  const std::string out = testing::temp_path("trained-tok.gguf");
  // The second input comes from stdin.
  const CommandResult r = run("train-tokenizer -i " + write_text("corpus-a.txt", a) + " -i - --vocab 300 -o " + out +
                              " < " + write_text("corpus-b.txt", b));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("300 tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("42 merges"), std::string::npos) << r.out;  // 300 - 256 bytes - 2 specials

  // The reported compression counts the tokens `tokenize` gives for the same text.
  const std::string both = write_text("corpus-ab.txt", a + b);
  const CommandResult ids = run("tokenize -m " + out + " -f " + both);
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  const size_t n_tokens = std::count(ids.out.begin(), ids.out.end(), ' ') + 1;
  EXPECT_NE(r.out.find(fmt::format("{} bytes in 2 input(s) -> {} tokens, {:.3f} bytes per token", a.size() + b.size(),
                                   n_tokens, double(a.size() + b.size()) / double(n_tokens))),
            std::string::npos)
      << r.out;
  EXPECT_LT(n_tokens, (a.size() + b.size()) / 2);  // the merges compress this repetitive text

  const std::string model = testing::temp_path("trained-tok-model.gguf");
  ASSERT_EQ(run("init-model --layers 1 --dim 32 --heads 2 --kv-heads 1 --ffn 64 --vocab-from " + out + " -o " + model)
                .exit_code,
            0);
  const auto info = nlohmann::json::parse(run("info " + model + " --json").out);
  EXPECT_EQ(info["tokenizer"]["model"], "gpt2");
  EXPECT_EQ(info["tokenizer"]["pre"], "qwen2");
  EXPECT_EQ(info["tokenizer"]["tokens"], 300);
  EXPECT_EQ(info["tokenizer"]["bos"], 298);
}

TEST(Cli, TrainTokenizerRefusesBadRequests) {
  const std::string corpus = write_text("corpus-small.txt", "the cat sat on the mat\n");
  const std::string out = " -o " + testing::temp_path("refused-tok.gguf");
  expect_clean_error(run("train-tokenizer -i " + corpus + " --vocab 100" + out), "258");
  expect_clean_error(run("train-tokenizer -i /nonexistent/corpus.txt" + out), "/nonexistent/corpus.txt");
  expect_clean_error(run("train-tokenizer -i " + write_text("empty.txt", "") + out), "empty");
  expect_clean_error(run("train-tokenizer -i " + corpus + " --pre nope" + out), "nope");
  expect_clean_error(run("train-tokenizer -i " + corpus + " --vocab 4096" + out), "at most");
  expect_clean_error(run("train-tokenizer -i " + corpus + " --vocab 260 -o /nonexistent/dir/tok.gguf"),
                     "/nonexistent/dir/tok.gguf");
}

}  // namespace
}  // namespace kvslim

namespace kvslim {
namespace {

TEST(Cli, TrainModelWritesALoadableModelAndAJsonLog) {
  const std::string out = testing::temp_path("cli-trained.gguf"), log = testing::temp_path("cli-train-log.jsonl");
  std::filesystem::remove(log);
  const CommandResult r =
      run("train-model --layers 1 --dim 32 --heads 2 --kv-heads 1 --ffn 64 --ctx 320 --steps 3 "
          "--warmup 1 --batch-tokens 300 --tasks passkey --curriculum 256 --threads 2 -o " +
          out + " --log " + log);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("step 3/3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tok/s"), std::string::npos) << r.err;
  std::ifstream in(log);
  std::string line;
  int steps = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["step"].get<int>(), ++steps);
    EXPECT_GT(j["loss"].get<double>(), 0.0);
  }
  EXPECT_EQ(steps, 3);
  const CommandResult info = run("info " + out);
  EXPECT_EQ(info.exit_code, 0) << info.err;
}

TEST(Cli, TrainModelRejectsBadOptionsInOneLine) {
  const std::string out = testing::temp_path("cli-bad.gguf");
  expect_clean_error(run("train-model --tasks nosuchtask -o " + out), "nosuchtask");
  expect_clean_error(run("train-model --curriculum 256:0 -o " + out), "curriculum");
  expect_clean_error(run("train-model --dim 30 --heads 4 -o " + out), "dim 30");
  expect_clean_error(run("train-model --resume -o " + out), "--checkpoint");
}

}  // namespace
}  // namespace kvslim

namespace kvslim {
namespace {

TEST(Cli, TrainModelPrintsTrainingSampleText) {
  const CommandResult r = run("train-model --print-samples 3 --tasks passkey,induction:0.001 --curriculum 256");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  size_t count = 0;
  for (size_t at = r.out.find("What is the pass key? The pass key is "); at != std::string::npos;
       at = r.out.find("What is the pass key? The pass key is ", at + 1))
    ++count;
  EXPECT_EQ(count, 3u) << r.out;
}

}  // namespace
}  // namespace kvslim
