// `kvslim apply-template` end to end: exact output (no newline added), token defaults from the
// model (vocab-only GGUF files too), overrides, stdin, and one-line errors on bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli_helpers.h"
#include "gguf/gguf.h"
#include "prerequisites.h"
#include "tokenizer/byte_vocab.h"
#include "test_models.h"

namespace kvslim {
namespace {

using testing::CommandResult;
using testing::expect_clean_error;
using testing::run;
using testing::temp_path;

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

const char* kTemplate =
    "{{ bos_token }}{% for m in messages %}\n"
    "{% if m.role not in ['user', 'assistant'] %}{{ raise_exception('unknown role ' + m.role) }}{% endif %}\n"
    "<{{ m.role }}>{{ m.content }}{{ eos_token }}\n"
    "{% endfor %}\n"
    "{% if add_generation_prompt %}<assistant>{% endif %}\n";

std::string conversation() {
  return write_file("conversation.json",
                    R"([{"role": "user", "content": "Hi é"}, {"role": "assistant", "content": "Yo"}])");
}

std::string vocab_with_template() {
  const std::string path = temp_path("apply-template-vocab.gguf");
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::of_string("llama"));
  add_byte_vocab(w);
  w.set("tokenizer.chat_template", gguf::Value::of_string(kTemplate));
  w.write(path);
  return path;
}

TEST(CliApplyTemplate, TemplateFilePrintsTheRenderingExactly) {
  const std::string t = write_file("t.jinja", kTemplate);
  const CommandResult r =
      run("apply-template --template " + t + " --messages " + conversation() + " --bos-token B --eos-token E");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "B<user>Hi éE\n<assistant>YoE\n<assistant>");
  const CommandResult n =
      run("apply-template --chat-template " + t + " --messages " + conversation() + " --no-generation-prompt");
  ASSERT_EQ(n.exit_code, 0) << n.err;
  EXPECT_EQ(n.out, "<user>Hi é\n<assistant>Yo\n");  // no tokens given, no model: empty
}

TEST(CliApplyTemplate, ModelGivesTemplateAndTokens) {
  const CommandResult r = run("apply-template -m " + vocab_with_template() + " --messages " + conversation());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "<s><user>Hi é</s>\n<assistant>Yo</s>\n<assistant>");
  const CommandResult o =
      run("apply-template -m " + vocab_with_template() + " --messages " + conversation() + " --eos-token '|'");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(o.out, "<s><user>Hi é|\n<assistant>Yo|\n<assistant>");
  // --template overrides the model's template and keeps its tokens.
  const std::string t = write_file("count.jinja", "{{ bos_token }}{{ messages|length }}");
  const CommandResult c =
      run("apply-template -m " + vocab_with_template() + " --template " + t + " --messages " + conversation());
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(c.out, "<s>2");
}

TEST(CliApplyTemplate, ExtraVariables) {
  const std::string t = write_file("vars.jinja", "{{ tools|length }} {{ tools[0].name }} {{ enable_thinking }}");
  const CommandResult r = run("apply-template --template " + t + " --messages " + conversation() +
                              R"( --vars '{"tools": [{"name": "f"}], "enable_thinking": false}')");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "1 f False");
  expect_clean_error(run("apply-template --template " + t + " --messages " + conversation() + " --vars '[1]'"),
                     "--vars");
  expect_clean_error(run("apply-template --template " + t + " --messages " + conversation() + " --vars '{'"), "--vars");
}

TEST(CliApplyTemplate, MessagesFromStdin) {
  const std::string t = write_file("t2.jinja", kTemplate);
  const CommandResult r = run("apply-template --template " + t + " --messages - < " + conversation());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "<user>Hi é\n<assistant>Yo\n<assistant>");
}

TEST(CliApplyTemplate, SharedVocabOnlyFileWithATemplate) {
  // Of ../shared/tokenizer-vectors, the Phi-3 vocabulary carries tokenizer.chat_template.
  const std::string phi3 = (testing::shared_dir() / "tokenizer-vectors/ggml-vocab-phi-3.gguf").string();
  const std::string deepseek = (testing::shared_dir() / "tokenizer-vectors/ggml-vocab-deepseek-llm.gguf").string();
  KVSLIM_REQUIRE(std::filesystem::exists(phi3) && std::filesystem::exists(deepseek),
                 "no " << phi3 << " or " << deepseek);
  const CommandResult r = run("apply-template -m " + phi3 + " --messages " + conversation());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "<s><|user|>\nHi é<|end|>\n<|assistant|>\nYo<|end|>\n");
  // Special-token texts of a byte-level BPE vocabulary come back as written (not byte-mapped).
  const std::string t = write_file("tokens.jinja", "{{ bos_token }}|{{ eos_token }}");
  const CommandResult d = run("apply-template -m " + deepseek + " --template " + t + " --messages " + conversation());
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_EQ(d.out, "<｜begin▁of▁sentence｜>|<｜end▁of▁sentence｜>");
}

TEST(CliApplyTemplate, BadInputGivesOneLine) {
  const std::string t = write_file("t3.jinja", kTemplate);
  expect_clean_error(run("apply-template --template " + t + " --messages " + write_file("bad.json", "[{\"role\": ")),
                     "not valid JSON");
  expect_clean_error(
      run("apply-template --template " + t + " --messages " + write_file("norole.json", R"([{"content": "x"}])")),
      "message 1 has no \"role\"");
  expect_clean_error(run("apply-template --template " + t + " --messages " +
                         write_file("tool.json", R"([{"role": "tool", "content": "x"}])")),
                     "line 2: unknown role tool");
  expect_clean_error(run("apply-template --template " + write_file("syntax.jinja", "ok\n{% for x in %}") +
                         " --messages " + conversation()),
                     "syntax.jinja line 2: syntax error");
  expect_clean_error(run("apply-template -m " + testing::tiny_vocab() + " --messages " + conversation()),
                     "--chat-template");
  expect_clean_error(run("apply-template --messages " + conversation()), "-m MODEL or a template with --template");
  expect_clean_error(run("apply-template --template " + t + " --messages " + temp_path("missing.json")),
                     "missing.json");
  expect_clean_error(run("apply-template --template " + temp_path("missing.jinja") + " --messages " + conversation()),
                     "missing.jinja");
}

}  // namespace
}  // namespace kvslim
