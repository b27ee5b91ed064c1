// --prefill-evict block on every command that takes compression options: it takes effect (the KV
// peak falls, the kept set or the perplexity changes, a KV file stores and restores it) or the
// command stops with one `error:` line naming the option. Nothing accepts it and runs as `end`.
// serve takes it as its setting for the methods that have it (a request choosing one without it
// evicts at the end): tests/test_server_prefill_evict.cpp.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "cli_helpers.h"
#include "gguf/gguf.h"

namespace kvslim::testing {
namespace {

using nlohmann::json;

std::string model() { return make_model(TinyModel{}); }

// About 300 tokens: 150 words.
std::string long_text(const std::string& word = "w") {
  std::string text;
  for (int i = 0; i < 150; ++i) text += fmt::format(" {}{}", word, i % 10);
  return text;
}

std::string file_with(const std::string& name, const std::string& text) {
  const std::string path = temp_path(name);
  std::ofstream(path) << text;
  return path;
}

// Block-wise, a head holds at most budget + block tokens while the prompt runs; at the end of
// prefill it held the whole prompt first.
const std::string kMethod = " --press snapkv --budget 16 --press-opt window=4 --batch 16 --threads 1";
const std::string kPress = kMethod + " --kv-page 4";  // pages of 4 tokens: the bytes follow the tokens

json run_json(const std::string& args) {
  const CommandResult r = run(args);
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
  return r.exit_code == 0 ? json::parse(r.out) : json();
}

void expect_refused(const std::string& args) {
  SCOPED_TRACE(args);
  expect_clean_error(run(args + " --press lagkv --prefill-evict block"), "--prefill-evict block: method 'lagkv'");
}

TEST(CliPrefillEvict, Generate) {
  const std::string base =
      "generate -m " + model() + " -f " + file_with("pe-prompt.txt", long_text()) + " -n 2 --temp 0 --json" + kPress;
  const json block = run_json(base + " --prefill-evict block"), end = run_json(base);
  EXPECT_LT(2 * block["kv_bytes_peak"].get<uint64_t>(), end["kv_bytes_peak"].get<uint64_t>()) << block << end;
  expect_refused("generate -m " + model() + " -p hi -n 1");
}

// Only the two words; anything else is one line naming the option, the two words and the value.
TEST(CliPrefillEvict, AnotherWordIsRefused) {
  expect_clean_error(run("generate -m " + model() + " -p hi -n 1 --prefill-evict Block"),
                     "--prefill-evict must be end or block (got 'Block')");
}

TEST(CliPrefillEvict, GenerateSaveAndLoadKv) {
  const std::string prompt = file_with("pe-doc.txt", long_text());
  const std::string block_kv = temp_path("pe-block.kv"), end_kv = temp_path("pe-end.kv");
  const std::string base = "generate -m " + model() + " -f " + prompt + " -n 2 --temp 0 --json" + kPress;
  const json block = run_json(base + " --prefill-evict block --save-kv " + block_kv);
  const json end = run_json(base + " --save-kv " + end_kv);
  EXPECT_LT(2 * block["kv_bytes_peak"].get<uint64_t>(), end["kv_bytes_peak"].get<uint64_t>()) << block << end;
  // The file holds the options the method ran with ...
  const std::vector<std::string> options = gguf::File::open(block_kv).get_string_array("kvslim.kv.press_options");
  EXPECT_EQ(options, (std::vector<std::string>{"window=4", "prefill=block"}));
  // ... so a long question continued from it is prefilled block-wise too.
  const std::string question = file_with("pe-question.txt", long_text("q"));
  const std::string load = "generate -m " + model() + " -f " + question +
                           " -n 2 --temp 0 --json --batch 16 --kv-page 4 --threads 1 --load-kv ";
  const json from_block = run_json(load + block_kv), from_end = run_json(load + end_kv);
  EXPECT_LT(2 * from_block["kv_bytes_peak"].get<uint64_t>(), from_end["kv_bytes_peak"].get<uint64_t>())
      << from_block << from_end;
  // The file decides the method: --prefill-evict with --load-kv is refused like --press.
  expect_clean_error(run(load + block_kv + " --prefill-evict block"), "--prefill-evict");
  expect_refused("generate -m " + model() + " -p hi -n 1 --save-kv " + temp_path("pe-never.kv"));
}

TEST(CliPrefillEvict, Chat) {
  const std::string tmpl = file_with("pe-template.jinja",
                                     "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
                                     "{% if add_generation_prompt %}<|assistant|>{% endif %}");
  const std::string kv = temp_path("pe-chat.kv");
  const std::string script = file_with("pe-chat.txt", long_text() + "\n/save " + kv + "\n/exit\n");
  const std::string base = "chat -m " + model() + " --chat-template " + tmpl + " -n 2 --temp 0";
  const CommandResult r = run(base + kPress + " --prefill-evict block < " + script);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The saved conversation's method is the one chat ran: block-wise.
  const std::vector<std::string> options = gguf::File::open(kv).get_string_array("kvslim.kv.press_options");
  EXPECT_EQ(options, (std::vector<std::string>{"window=4", "prefill=block"}));
  expect_refused(base + " </dev/null");
  // A conversation loaded from a file runs the file's method: the option would be ignored.
  expect_clean_error(run(base + " --load-kv " + kv + " --prefill-evict block </dev/null"), "--prefill-evict");
}

TEST(CliPrefillEvict, Perplexity) {
  const std::string text = file_with("pe-ppl.txt", long_text() + long_text("v"));
  // Chunks of 128: a first half of 64 tokens in four blocks of 16, evicted after the second, third
  // and fourth (with one eviction, at the last block, the window's votes would be the same).
  const std::string base = "perplexity -m " + model() + " -f " + text + " --ctx 128 --chunks 2 --json" + kPress;
  const json block = run_json(base + " --prefill-evict block"), end = run_json(base);
  // The first half of each chunk is compressed block by block: other tokens kept, another ppl.
  EXPECT_NE(block["ppl"].get<double>(), end["ppl"].get<double>());
  expect_refused("perplexity -m " + model() + " -f " + text + " --ctx 64 --chunks 1");
  // full (no budget) compresses nothing, but still refuses an option it cannot honour.
  expect_clean_error(run("perplexity -m " + model() + " -f " + text + " --ctx 64 --prefill-evict block"),
                     "--prefill-evict block: method 'full'");
}

TEST(CliPrefillEvict, Bench) {
  // bench has no --kv-page: pages of 256 tokens, so a prompt of 1024 (4 pages per head at the end,
  // 1 block-wise).
  const std::string base =
      "bench -m " + model() + " --prompt-lengths 1024 --context-lengths 16 --reps 1 --json" + kMethod;
  const json block = run_json(base + " --prefill-evict block"), end = run_json(base);
  EXPECT_LT(2 * block["prefill"][0]["kv_bytes_peak"].get<uint64_t>(),
            end["prefill"][0]["kv_bytes_peak"].get<uint64_t>())
      << block["prefill"] << end["prefill"];
  expect_refused("bench -m " + model() + " --prompt-lengths 16 --context-lengths 16 --reps 1");
}

TEST(CliPrefillEvict, Inspect) {
  const std::string prompt = file_with("pe-inspect.txt", long_text());
  const std::string block_out = temp_path("pe-block.json"), end_out = temp_path("pe-end.json");
  const std::string base = "inspect -m " + model() + " -f " + prompt + kPress;
  ASSERT_EQ(run(base + " --prefill-evict block -o " + block_out).exit_code, 0);
  ASSERT_EQ(run(base + " -o " + end_out).exit_code, 0);
  const json block = json::parse(std::ifstream(block_out)), end = json::parse(std::ifstream(end_out));
  EXPECT_NE(block["layers"], end["layers"]) << "the same kept positions: block-wise eviction did not run";
  expect_refused("inspect -m " + model() + " -p hi -o " + temp_path("pe-never.json"));
}

}  // namespace
}  // namespace kvslim::testing
