// The server's pure parts: the request parser (with the fuzz corpus replayed), stop strings and
// cut UTF-8 in streamed text, slot file names, and the CLI-flag-to-field rewriting of messages.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "server/request_error.h"
#include "server/request_parser.h"
#include "server/slot_files.h"
#include "server/text_stream.h"
#include "test_models.h"

namespace kvslim::server {
namespace {

const RequestLimits kLimits;

RequestError refused(const std::string& body, bool chat = false) {
  try {
    parse_completion_request(body, chat, kLimits);
  } catch (const RequestError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return RequestError(0, "", "");
}

TEST(RequestParser, ReadsEveryFieldOfACompletion) {
  const auto r = parse_completion_request(
      R"({"prompt": "hi", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 3, "min_p": 0.1, "seed": 99,
          "stop": ["a", "bc"], "stream": true, "press": "snapkv", "budget": 64, "press_options": {"window": 8, "x": true},
          "logprobs": 2, "kv_map": true, "model": "m"})",
      false, kLimits);
  EXPECT_EQ(r.prompt, "hi");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 3);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_EQ(r.sampling.seed, 99u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(*r.press, "snapkv");
  EXPECT_EQ(*r.budget, 64);
  EXPECT_EQ(*r.press_options, (std::vector<std::string>{"window=8", "x=true"}));
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 2);
  EXPECT_TRUE(r.kv_map);
  EXPECT_EQ(r.model, "m");
}

TEST(RequestParser, DefaultsNullsAndTokenPrompts) {
  const auto r = parse_completion_request(R"({"prompt": [1, 2, 3], "max_tokens": null, "seed": -1})", false, kLimits);
  EXPECT_TRUE(r.has_prompt_ids);
  EXPECT_EQ(r.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(r.max_tokens, kLimits.default_max_tokens);
  EXPECT_TRUE(r.random_seed);
  EXPECT_FALSE(r.press.has_value());
  EXPECT_EQ(parse_completion_request(R"({"prompt": "x", "n_predict": 9})", false, kLimits).max_tokens, 9);
}

TEST(RequestParser, ChatMessagesKeepExtraFieldsAndJoinTextParts) {
  const auto r = parse_completion_request(
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
          "name": "n"}, {"role": "assistant"}], "logprobs": true, "top_logprobs": 4})",
      true, kLimits);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0]["content"], "ab");
  EXPECT_EQ(r.messages[0]["name"], "n");
  EXPECT_EQ(r.messages[1]["content"], "");
  EXPECT_EQ(r.top_logprobs, 4);
}

TEST(RequestParser, RefusalsNameTheField) {
  EXPECT_EQ(refused("{").param, "");
  EXPECT_EQ(refused("[]").param, "");
  EXPECT_EQ(refused("{}").param, "prompt");
  EXPECT_EQ(refused(R"({"prompt": "x", "max_tokens": 5000})").param, "max_tokens");
  EXPECT_EQ(refused(R"({"prompt": "x", "max_tokens": 2.5})").param, "max_tokens");
  EXPECT_EQ(refused(R"({"prompt": "x", "max_tokens": 18446744073709551615})").param, "max_tokens");
  EXPECT_EQ(refused(R"({"prompt": "x", "temperature": "hot"})").param, "temperature");
  EXPECT_EQ(refused(R"({"prompt": "x", "seed": -2})").param, "seed");
  EXPECT_EQ(refused(R"({"prompt": "x", "stop": ["a","b","c","d","e","f","g","h","i"]})").param, "stop");
  EXPECT_EQ(refused(R"({"prompt": "x", "budget": 3, "ratio": 0.5})").param, "budget");
  EXPECT_EQ(refused(R"({"prompt": "x", "press_options": {"a": [1]}})").param, "press_options");
  EXPECT_EQ(refused(R"({"prompt": "x", "n": 2})").param, "n");
  EXPECT_EQ(refused(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", true).param,
            "messages[0].content");
  EXPECT_EQ(refused(R"({"messages": [{"role": "user"}], "top_logprobs": 2})", true).param, "top_logprobs");
  EXPECT_EQ(refused("{\"prompt\": \"\xff\"}").status, 400);  // invalid UTF-8
  const RequestError e = refused(R"({"prompt": "x", "top_p": 0})");
  EXPECT_EQ(e.param, "sampling");
  EXPECT_NE(std::string(e.what()).find("top_p must be in (0, 1]"), std::string::npos) << e.what();
}

TEST(RequestParser, CliFlagsBecomeFieldNames) {
  EXPECT_EQ(cli_flags_to_fields("--budget must be > 0 (got 0)"), "budget must be > 0 (got 0)");
  EXPECT_EQ(cli_flags_to_fields("give --budget or --ratio, not both"), "give budget or ratio, not both");
  EXPECT_EQ(cli_flags_to_fields("see --press-opt and --press"), "see press_options and press");
  EXPECT_EQ(cli_flags_to_fields("--temp must be >= 0"), "temperature must be >= 0");
}

// Every file of the fuzz corpus parses or is refused with a 400, nothing else.
TEST(RequestParser, FuzzCorpusIsParsedOrRefused) {
  const std::filesystem::path dir = std::filesystem::path(KVSLIM_SOURCE_DIR) / "tests/fuzz/corpus";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (data.empty()) continue;
    ++files;
    try {
      parse_completion_request(data.substr(1), data[0] & 1, kLimits);
    } catch (const RequestError& e) {
      EXPECT_EQ(e.status, 400) << entry.path();
    }
  }
  EXPECT_GE(files, 8);
}

TEST(TextStream, StopStringEndsTheTextBeforeIt) {
  TextStream s({"END"});
  std::string out = s.push("Hello E");
  EXPECT_EQ(out, "Hello ");  // "E" may start the stop string
  out += s.push("N");
  EXPECT_EQ(out, "Hello ");
  out += s.push("D and more");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(out, "Hello ");
  EXPECT_EQ(s.push("x"), "");
  EXPECT_EQ(s.text(), "Hello ");
}

TEST(TextStream, PrefixThatNeverCompletesIsSentLater) {
  TextStream s({"STOP"});
  std::string out = s.push("a ST");
  EXPECT_EQ(out, "a ");
  out += s.push("ar");
  EXPECT_EQ(out, "a STar");
  EXPECT_FALSE(s.stopped());
}

TEST(TextStream, CutUtf8IsHeldUntilComplete) {
  TextStream s;
  const std::string euro = "\xe2\x82\xac";
  EXPECT_EQ(s.push("x" + euro.substr(0, 1)), "x");
  EXPECT_EQ(s.push(euro.substr(1, 1)), "");
  EXPECT_EQ(s.push(euro.substr(2)), euro);
  EXPECT_EQ(s.push("\xf0\x9f"), "");
  EXPECT_EQ(s.flush(), "\xf0\x9f");  // never completed: sent as is (the JSON writer replaces it)
  EXPECT_EQ(incomplete_utf8_tail("ab"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("a\xc3"), 1u);
  EXPECT_EQ(incomplete_utf8_tail("\xc3\xa9"), 0u);
}

TEST(SlotFiles, NamesStayInsideTheFolder) {
  const std::string dir = testing::temp_path("slot-files");
  std::filesystem::create_directories(dir);
  EXPECT_EQ(slot_file_path(dir, "conv-1.kv"), std::filesystem::canonical(dir) / "conv-1.kv");
  for (const char* bad : {"", "../x", "/etc/passwd", ".kv", "a/b", "a b", "-x"}) {
    try {
      slot_file_path(dir, bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const RequestError& e) {
      EXPECT_EQ(e.status, 400);
      EXPECT_EQ(e.param, "filename");
    }
  }
  // A symlink planted in the folder cannot lead outside it.
  std::filesystem::remove(dir + "/link");
  std::filesystem::create_symlink("/etc/passwd", dir + "/link");
  EXPECT_THROW(slot_file_path(dir, "link"), RequestError);
  try {
    slot_file_path("", "a.kv");
    ADD_FAILURE();
  } catch (const RequestError& e) {
    EXPECT_EQ(e.status, 501);
  }
}

}  // namespace
}  // namespace kvslim::server
