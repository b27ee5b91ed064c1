// Tokenizer tests: llama.cpp's reference vocabularies and vectors (generated with the models'
// Hugging Face tokenizers), round trips, special-token parsing, and hand-computed merges on
// tiny vocabularies written with gguf::Writer.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "chat/harmony_channels.h"
#include "gguf/gguf.h"
#include "prerequisites.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace kvslim {
namespace {

namespace fs = std::filesystem;

const fs::path kVectorDir = testing::shared_dir() / "tokenizer-vectors";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// FILE.inp holds the cases, each followed by "\n__ggml_vocab_test__\n"; that newline and the
// separator line are not part of the case.
std::vector<std::string> read_cases(const fs::path& path) {
  const std::string content = read_file(path);
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> cases;
  size_t pos = 0;
  for (size_t hit = content.find(separator); hit != std::string::npos; hit = content.find(separator, pos)) {
    cases.push_back(content.substr(pos, hit - pos));
    pos = hit + separator.size();
  }
  return cases;
}

// FILE.out: one line of space-separated ids per case; an empty line is an empty list.
std::vector<std::vector<int32_t>> read_expected(const fs::path& path) {
  std::istringstream in(read_file(path));
  std::vector<std::vector<int32_t>> expected;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ids(line);
    std::vector<int32_t>& row = expected.emplace_back();
    for (int32_t id = 0; ids >> id;) row.push_back(id);
  }
  return expected;
}

std::string join(const std::vector<int32_t>& ids) {
  std::string out;
  for (const int32_t id : ids) {
    if (!out.empty()) out += ' ';
    out += std::to_string(id);
  }
  return out;
}

Tokenizer load_vector_vocab(const std::string& name) {
  const fs::path path = kVectorDir / ("ggml-vocab-" + name + ".gguf");
  if (!fs::exists(path)) throw Error("missing " + path.string());
  return Tokenizer::from_gguf(gguf::File::open(path.string()));
}

#define SKIP_WITHOUT_VECTORS() KVSLIM_REQUIRE(fs::is_directory(kVectorDir), "no test vectors at " << kVectorDir)

TEST(TokenizerVectors, EveryVocabularyMatchesItsReferenceTokens) {
  SKIP_WITHOUT_VECTORS();
  std::vector<fs::path> vocabs;
  for (const auto& entry : fs::directory_iterator(kVectorDir)) {
    if (entry.path().extension() == ".gguf") vocabs.push_back(entry.path());
  }
  std::sort(vocabs.begin(), vocabs.end());
  ASSERT_FALSE(vocabs.empty()) << "no *.gguf in " << kVectorDir;

  for (const fs::path& vocab_path : vocabs) {
    SCOPED_TRACE(vocab_path.filename().string());
    const std::vector<std::string> cases = read_cases(vocab_path.string() + ".inp");
    const std::vector<std::vector<int32_t>> expected = read_expected(vocab_path.string() + ".out");
    ASSERT_FALSE(cases.empty());
    ASSERT_EQ(cases.size(), expected.size()) << "case count of .inp differs from line count of .out";

    const Tokenizer tokenizer = Tokenizer::from_gguf(gguf::File::open(vocab_path.string()));
    size_t passed = 0;
    std::string failures;
    for (size_t i = 0; i < cases.size(); ++i) {
      const std::vector<int32_t> got = tokenizer.encode(cases[i], /*add_bos=*/false, /*parse_special=*/false);
      if (got == expected[i]) {
        ++passed;
      } else {
        failures += "  case " + std::to_string(i) + " '" + cases[i] + "'\n    expected: " + join(expected[i]) +
                    "\n    got:      " + join(got) + "\n";
      }
    }
    std::printf("[ vectors  ] %s: %zu/%zu cases match\n", vocab_path.filename().c_str(), passed, cases.size());
    EXPECT_EQ(passed, cases.size()) << vocab_path.filename().string() << ": " << passed << "/" << cases.size()
                                    << " cases match\n"
                                    << failures;
  }
}

const std::vector<std::string> kRoundTripTexts = {
    "Hello world",
    "  two leading spaces, trailing ones  ",
    "line one\nline two\n\n\ttabbed\r\nwindows",
    "Ünïcödé façade — naïve café, 中文字符, 日本語のテキスト, 한국어",
    "emoji 🦙🚀👍🏽 family 👨‍👩‍👧 flag 🇩🇪",
    "code: for (int i = 0; i < n; ++i) { x[i] *= 2; }  // comment",
    "3.14159 + 2,718 = 1234567890",
};

TEST(TokenizerRoundTrip, Gpt2DecodesToTheExactInput) {
  SKIP_WITHOUT_VECTORS();
  const Tokenizer tokenizer = load_vector_vocab("gpt-2");
  for (const std::string& text : kRoundTripTexts) {
    EXPECT_EQ(tokenizer.decode(tokenizer.encode(text, false, false)), text);
  }
  // Byte-level BPE keeps even invalid UTF-8 intact.
  const std::string invalid = "bad \xff\xfe bytes \xc3";
  EXPECT_EQ(tokenizer.decode(tokenizer.encode(invalid, false, false)), invalid);
}

TEST(TokenizerRoundTrip, LlamaSpmDecodesToTheInputWithItsLeadingSpace) {
  SKIP_WITHOUT_VECTORS();
  const Tokenizer tokenizer = load_vector_vocab("llama-spm");
  for (const std::string& text : kRoundTripTexts) {
    EXPECT_EQ(tokenizer.decode(tokenizer.encode(text, false, false)), " " + text);
  }
  // Characters outside the vocabulary come back through byte tokens.
  const std::string rare = "\xf0\x9f\xa6\x99 \xff";
  EXPECT_EQ(tokenizer.decode(tokenizer.encode(rare, false, false)), " " + rare);
  EXPECT_TRUE(tokenizer.encode("", false, false).empty());
}

TEST(TokenizerSpecial, Gpt2EndOfTextIsOneTokenOnlyWhenParsingSpecials) {
  SKIP_WITHOUT_VECTORS();
  const Tokenizer tokenizer = load_vector_vocab("gpt-2");
  const std::string text = "Hi<|endoftext|>there";
  const std::vector<int32_t> parsed = tokenizer.encode(text, false, true);
  const std::vector<int32_t> plain = tokenizer.encode(text, false, false);
  EXPECT_NE(std::find(parsed.begin(), parsed.end(), 50256), parsed.end());
  EXPECT_EQ(std::find(plain.begin(), plain.end(), 50256), plain.end());
  EXPECT_LT(parsed.size(), plain.size());
  EXPECT_EQ(tokenizer.decode(plain), text);
  EXPECT_EQ(tokenizer.decode(parsed), "Hithere");
  EXPECT_EQ(tokenizer.decode(parsed, /*render_special=*/true), text);
  EXPECT_TRUE(tokenizer.is_end_of_generation(50256));
  EXPECT_FALSE(tokenizer.add_bos_by_default());
}

TEST(TokenizerSpecial, LlamaSpmBosTextAndBosFlag) {
  SKIP_WITHOUT_VECTORS();
  const Tokenizer tokenizer = load_vector_vocab("llama-spm");
  EXPECT_EQ(tokenizer.model_name(), "llama");
  EXPECT_EQ(tokenizer.bos_id(), 1);
  EXPECT_EQ(tokenizer.eos_id(), 2);
  EXPECT_TRUE(tokenizer.add_bos_by_default());
  EXPECT_TRUE(tokenizer.is_end_of_generation(2));
  EXPECT_FALSE(tokenizer.is_end_of_generation(1));

  const std::vector<int32_t> parsed = tokenizer.encode("<s>Hello", false, true);
  const std::vector<int32_t> plain = tokenizer.encode("<s>Hello", false, false);
  ASSERT_FALSE(parsed.empty());
  EXPECT_EQ(parsed.front(), 1);
  // After a special token the text gets its space prefix again: "<s>Hello" == <s> + "▁Hello".
  EXPECT_EQ(std::vector<int32_t>(parsed.begin() + 1, parsed.end()), tokenizer.encode("Hello", false, false));
  EXPECT_EQ(std::find(plain.begin(), plain.end(), 1), plain.end());
  EXPECT_EQ(tokenizer.decode(plain), " <s>Hello");

  const std::vector<int32_t> with_bos = tokenizer.encode("Hello", true, false);
  ASSERT_FALSE(with_bos.empty());
  EXPECT_EQ(with_bos.front(), 1);
  EXPECT_EQ(tokenizer.decode(with_bos), " Hello");
  EXPECT_EQ(tokenizer.decode(with_bos, true), "<s> Hello");
}

TEST(TokenizerSpecial, Phi3UserDefinedTokenIsAlwaysMatched) {
  SKIP_WITHOUT_VECTORS();
  const Tokenizer tokenizer = load_vector_vocab("phi-3");
  // </s> is user-defined (type 4) in Phi-3, so it is split out even without parse_special;
  // <|end|> is a control token and is only recognised with parse_special.
  const std::vector<int32_t> plain = tokenizer.encode("a</s>b", false, false);
  EXPECT_NE(std::find(plain.begin(), plain.end(), 2), plain.end());
  const std::vector<int32_t> end_plain = tokenizer.encode("a<|end|>", false, false);
  const std::vector<int32_t> end_parsed = tokenizer.encode("a<|end|>", false, true);
  EXPECT_EQ(std::find(end_plain.begin(), end_plain.end(), 32007), end_plain.end());
  ASSERT_FALSE(end_parsed.empty());
  EXPECT_EQ(end_parsed.back(), 32007);
  EXPECT_TRUE(tokenizer.is_end_of_generation(32007));  // <|end|> ends a Phi-3 chat turn
  EXPECT_TRUE(tokenizer.is_end_of_generation(32000));  // EOS <|endoftext|>
}

std::vector<std::string> split(const std::string& pre, const std::string& text) {
  const tok::PreTokenizer pre_tokenizer = tok::PreTokenizer::for_name(pre);
  std::vector<std::string> pieces;
  for (const std::string_view piece : pre_tokenizer.split(text)) pieces.emplace_back(piece);
  return pieces;
}

using Pieces = std::vector<std::string>;

TEST(TokenizerPreTokenize, Llama3GroupsDigitsByThreeAndFoldsContractionCase) {
  EXPECT_EQ(split("llama-bpe", "Hello world's 12345 !!\n\n  x"),
            (Pieces{"Hello", " world", "'s", " ", "123", "45", " !!\n\n", " ", " x"}));
  EXPECT_EQ(split("llama-bpe", "IT'S a \n\nb"), (Pieces{"IT", "'S", " a", " \n\n", "b"}));
  EXPECT_EQ(split("gpt-2", "IT'S"), (Pieces{"IT", "'", "S"}));
}

TEST(TokenizerPreTokenize, Qwen2SplitsSingleDigits) {
  EXPECT_EQ(split("qwen2", "Hello world's 12345 !!\n\n  x"),
            (Pieces{"Hello", " world", "'s", " ", "1", "2", "3", "4", "5", " !!\n\n", " ", " x"}));
}

TEST(TokenizerPreTokenize, Gpt4oSplitsWordsAtCaseChangesAndKeepsContractions) {
  // gpt-oss's o200k pattern: an upper-case run followed by lower case is one word ("HTTPServer"),
  // a lower-to-upper change starts a new one ("camel", "Case"), a contraction of any case stays
  // on its word, punctuation runs keep their newlines and slashes, a non-letter leads a word.
  EXPECT_EQ(split("gpt-4o", "HTTPServer camelCase IT'S don'T 12345 ok!!\n\n  x"),
            (Pieces{"HTTPServer", " camel", "Case", " IT'S", " don'T", " ", "123", "45", " ok", "!!\n\n", " ", " x"}));
  EXPECT_EQ(split("gpt-4o", "a/b//\n c 世界 naïve"), (Pieces{"a", "/b", "//\n", " c", " 世界", " naïve"}));
}

TEST(TokenizerPreTokenize, RegexesApplyInSequenceToEachPiece) {
  // deepseek-llm: newlines, letter runs, punctuation runs, trailing whitespace, CJK, digits.
  EXPECT_EQ(split("deepseek-llm", "Hello, 世界! 123\n  end  "),
            (Pieces{"Hello", ",", " ", "世界", "!", " ", "123", "\n", " ", " end", "  "}));
  EXPECT_TRUE(split("gpt-2", "").empty());
}

TEST(TokenizerPerformance, TenThousandTokensEncodeQuickly) {
  SKIP_WITHOUT_VECTORS();
  std::string text;
  const std::string paragraph =
      "The quick brown fox jumps over the lazy dog. In 1984, researchers measured 3,141 samples "
      "across 27 sites; results varied (see Table 2). \"Isn't it remarkable?\" she asked.\n";
  while (text.size() < 60000) text += paragraph;
  for (const char* name : {"gpt-2", "llama-spm", "deepseek-llm"}) {
    const Tokenizer tokenizer = load_vector_vocab(name);
    const auto start = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = tokenizer.encode(text, false, false);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GT(ids.size(), 10000u) << name;
    // Generous bound so unoptimised builds pass; an optimised build takes a few milliseconds.
    EXPECT_LT(seconds, 2.0) << name << ": " << ids.size() << " tokens";
    std::printf("[ perf     ] %s: %zu tokens in %.1f ms\n", name, ids.size(), seconds * 1000);
  }
}

// ---- tiny hand-made vocabularies ----

struct TinyToken {
  std::string text;
  float score;
  int32_t type;
};

Tokenizer tiny_tokenizer(const std::string& model, const std::string& pre, const std::vector<TinyToken>& tokens,
                         const std::vector<std::string>& merges = {},
                         const std::vector<gguf::MetadataEntry>& extra = {}) {
  gguf::Writer writer;
  for (const gguf::MetadataEntry& entry : extra) writer.set(entry.key, entry.value);
  writer.set("general.architecture", gguf::Value::of_string("llama"));
  writer.set("tokenizer.ggml.model", gguf::Value::of_string(model));
  if (!pre.empty()) writer.set("tokenizer.ggml.pre", gguf::Value::of_string(pre));
  std::vector<std::string> texts;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (const TinyToken& token : tokens) {
    texts.push_back(token.text);
    scores.push_back(token.score);
    types.push_back(token.type);
  }
  writer.set("tokenizer.ggml.tokens", gguf::Value::of_string_array(texts));
  writer.set("tokenizer.ggml.scores", gguf::Value::of_f32_array(scores));
  writer.set("tokenizer.ggml.token_type", gguf::Value::of_i32_array(types));
  if (model == "gpt2") writer.set("tokenizer.ggml.merges", gguf::Value::of_string_array(merges));

  // One file per process: ctest runs tests of this file in parallel processes.
  const fs::path path = fs::path(::testing::TempDir()) / ("kvslim_tiny_vocab_" + std::to_string(getpid()) + ".gguf");
  writer.write(path.string());
  const std::string bytes = read_file(path);
  fs::remove(path);
  return Tokenizer::from_gguf(gguf::File::from_bytes(std::vector<uint8_t>(bytes.begin(), bytes.end())));
}

// ids:                     0        1       2        3         4      5     6     7     8     9     10
const std::vector<TinyToken> kTinySpm = {
    {"<unk>", 0, 2},
    {"<s>", 0, 3},
    {"</s>", 0, 3},
    {"<0x21>", 0, 6},
    {"\u2581", -1, 1},
    {"a", -2, 1},
    {"b", -2, 1},
    {"c", -2, 1},
    {"ab", -1.5, 1},
    {"bc", -0.5, 1},
    {"\u2581a", -1, 1},
    // 11                 12            13
    {"abc", -0.1f, 1},
    {"x", -3, 1},
    {"xx", -1, 1},
};

TEST(TokenizerTinySpm, MergesHighestScoringPairFirst) {
  const Tokenizer tokenizer = tiny_tokenizer("llama", "", kTinySpm);
  // "▁abc": bc (-0.5) beats ▁a (-1) and ab (-1.5); then abc (-0.1) forms; "▁abc" is no piece.
  EXPECT_EQ(tokenizer.encode("abc", false, false), (std::vector<int32_t>{4, 11}));
  // "▁ab!": ▁a (-1) beats ab (-1.5), leaving b; '!' has only a byte token.
  EXPECT_EQ(tokenizer.encode("ab!", false, false), (std::vector<int32_t>{10, 6, 3}));
  // '?' has neither a piece nor a byte token: <unk>.
  EXPECT_EQ(tokenizer.encode("ab?", false, false), (std::vector<int32_t>{10, 6, 0}));
  // Equal scores: the leftmost pair merges first.
  EXPECT_EQ(tokenizer.encode("xxx", false, false), (std::vector<int32_t>{4, 13, 12}));
  EXPECT_EQ(tokenizer.encode("abc", true, false), (std::vector<int32_t>{1, 4, 11}));
  EXPECT_EQ(tokenizer.decode({1, 4, 11, 10, 3, 2}), " abc a!");
}

TEST(TokenizerTinySpm, MetadataSwitchesOffSpacePrefixAndBos) {
  const Tokenizer tokenizer = tiny_tokenizer("llama", "", kTinySpm, {},
                                             {{"tokenizer.ggml.add_space_prefix", gguf::Value::of_bool(false)},
                                              {"tokenizer.ggml.add_bos_token", gguf::Value::of_bool(false)}});
  EXPECT_EQ(tokenizer.encode("abc", false, false), (std::vector<int32_t>{11}));
  EXPECT_FALSE(tokenizer.add_bos_by_default());
  EXPECT_EQ(tokenizer.bos_id(), 1);  // SentencePiece default ids when the metadata names none
  EXPECT_EQ(tokenizer.eos_id(), 2);
}

// Byte-level spellings: "Ġ" is the space byte.
const std::vector<TinyToken> kTinyBpe = {
    {"a", 0, 1},   {"b", 0, 1},  {"c", 0, 1},
    {"d", 0, 1},   {"Ġ", 0, 1},  {"ab", 0, 1},
    {"abc", 0, 1}, {"Ġa", 0, 1}, {"<|endoftext|>", 0, 3},
};

TEST(TokenizerTinyBpe, MergesLowestRankFirst) {
  const Tokenizer tokenizer = tiny_tokenizer("gpt2", "gpt-2", kTinyBpe, {"a b", "ab c", "Ġ a"});
  // Words "abc" and " abd": a+b (rank 0), ab+c (rank 1) -> abc; in "Ġabd" a+b (rank 0) beats
  // the leftmost Ġ+a (rank 2), and "Ġ ab" is no merge.
  EXPECT_EQ(tokenizer.encode("abc abd", false, false), (std::vector<int32_t>{6, 4, 5, 3}));
  EXPECT_EQ(tokenizer.encode(" a", false, false), (std::vector<int32_t>{7}));
  EXPECT_EQ(tokenizer.encode("abc<|endoftext|>", false, true), (std::vector<int32_t>{6, 8}));
  EXPECT_EQ(tokenizer.decode({6, 4, 5, 3}), "abc abd");
  EXPECT_EQ(tokenizer.pre_name(), "gpt-2");
}

TEST(TokenizerTinyBpe, Llama3TakesWholeWordsThatAreTokens) {
  // No merges at all: the gpt-2 pre-tokenizer spells "abc" letter by letter, while llama-bpe
  // takes a piece that is itself a token as is (Hugging Face's ignore_merges).
  EXPECT_EQ(tiny_tokenizer("gpt2", "gpt-2", kTinyBpe).encode("abc", false, false), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(tiny_tokenizer("gpt2", "llama-bpe", kTinyBpe).encode("abc", false, false), (std::vector<int32_t>{6}));
}

TEST(TokenizerTinyBpe, HarmonyEndsAtReturnAndCallButNotAtEnd) {
  // gpt-oss: <|end|> closes the reasoning message and the answer follows, so only <|return|>
  // and <|call|> end generation, even when the metadata names <|end|> as end of turn. Without
  // those two tokens (Phi-3's vocabulary) <|end|> still ends a turn.
  std::vector<TinyToken> harmony = kTinyBpe;
  for (const char* text : {"<|end|>", "<|return|>", "<|call|>", "<|start|>"}) harmony.push_back({text, 0, 3});
  const Tokenizer gpt_oss = tiny_tokenizer("gpt2", "gpt-4o", harmony, {},
                                           {{"tokenizer.ggml.eos_token_id", gguf::Value::of_u32(10)},
                                            {"tokenizer.ggml.eot_token_id", gguf::Value::of_u32(9)}});
  EXPECT_FALSE(gpt_oss.is_end_of_generation(9));  // <|end|>
  EXPECT_TRUE(gpt_oss.is_end_of_generation(10));  // <|return|>
  EXPECT_TRUE(gpt_oss.is_end_of_generation(11));  // <|call|>
  EXPECT_FALSE(gpt_oss.is_end_of_generation(12));
  EXPECT_TRUE(gpt_oss.is_end_of_generation(8));  // <|endoftext|>
  // What chat and the server follow to keep gpt-oss's reasoning apart from its answer: found in
  // this vocabulary (which lacks <|channel|> until it is added), never in one without it.
  EXPECT_FALSE(HarmonyTokens::find(gpt_oss));
  for (const char* text : {"<|channel|>", "<|message|>"}) harmony.push_back({text, 0, 3});
  const std::optional<HarmonyTokens> ids = HarmonyTokens::find(tiny_tokenizer("gpt2", "gpt-4o", harmony));
  ASSERT_TRUE(ids);
  EXPECT_EQ(ids->start, 12);
  EXPECT_EQ(ids->channel, 13);
  EXPECT_EQ(ids->message, 14);
  EXPECT_EQ(ids->end, 9);
  EXPECT_EQ(ids->constrain, -1);

  std::vector<TinyToken> no_call = kTinyBpe;
  no_call.push_back({"<|end|>", 0, 3});
  EXPECT_TRUE(tiny_tokenizer("gpt2", "gpt-4o", no_call).is_end_of_generation(9));
}

TEST(TokenizerTinyBpe, UnknownPreTokenizerIsNamed) {
  try {
    tiny_tokenizer("gpt2", "no-such-pre", kTinyBpe);
    FAIL() << "expected kvslim::Error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'no-such-pre'"), std::string::npos) << message;
    EXPECT_NE(message.find("llama-bpe"), std::string::npos) << message;
  }
}

TEST(TokenizerTinyBpe, UnknownModelIsNamed) {
  try {
    tiny_tokenizer("bert", "", kTinyBpe);
    FAIL() << "expected kvslim::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'bert'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvslim
