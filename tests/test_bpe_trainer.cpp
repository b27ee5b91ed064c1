// The byte-level BPE trainer: hand-counted merges, the written GGUF loaded by the ordinary
// tokenizer, round trips, the digit rule, determinism, exact vocabulary size and errors; and
// the line chunking the trainer pre-tokenizes with.
#include <gtest/gtest.h>

#include <cstdio>
#include <ctime>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "test_models.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace kvslim {
namespace {

using tok::BpeTrainer;
using tok::BpeTrainerOptions;
using tok::TrainedVocab;

TrainedVocab train(const std::vector<std::string>& texts, BpeTrainerOptions options) {
  BpeTrainer trainer(std::move(options));
  for (const std::string& text : texts) trainer.add_text(text);
  return trainer.train();
}

BpeTrainerOptions with_vocab(int32_t vocab_size, std::string pre = "qwen2", bool allow_digit_merges = false) {
  BpeTrainerOptions options;
  options.vocab_size = vocab_size;
  options.pre = std::move(pre);
  options.allow_digit_merges = allow_digit_merges;
  return options;
}

Tokenizer load(const TrainedVocab& vocab, const std::string& name) {
  const std::string path = testing::temp_path(name);
  tok::write_tokenizer_gguf(vocab, path);
  return Tokenizer::from_gguf(gguf::File::open(path));
}

std::string repeat_lines(const std::vector<std::pair<std::string, int>>& words) {
  std::string text;
  for (const auto& [word, count] : words) {
    for (int i = 0; i < count; ++i) text += word + "\n";
  }
  return text;
}

// One word per line, so every piece is a bare word (qwen2 splits off each "\n"): hug x10,
// pug x5, pun x12, bun x4, hugs x5.
const std::string kHugCorpus = repeat_lines({{"hug", 10}, {"pug", 5}, {"pun", 12}, {"bun", 4}, {"hugs", 5}});

// Hand count of the adjacent pairs, merge by merge:
//   start:  u g 20 (hug 10 + pug 5 + hugs 5), p u 17, u n 16, h u 15, g s 5, b u 4  -> "u g"
//   then:   u n 16 (pun 12 + bun 4), h ug 15, p u 12, p ug 5, ug s 5, b u 4          -> "u n"
//   then:   h ug 15 (hug 10 + hugs 5), p un 12, p ug 5, ug s 5, b un 4               -> "h ug"
//   then:   p un 12, hug s 5, p ug 5, b un 4                                         -> "p un"
//   then:   hug s 5 and p ug 5 tie; "hug" < "p"                                      -> "hug s"
//   then:   p ug 5, b un 4 -> "p ug"; last b un 4 -> "b un"; then no pair is left (265 tokens).
const std::vector<std::string> kHugMerges = {"u g", "u n", "h ug", "p un", "hug s", "p ug", "b un"};

TEST(BpeTrainer, FirstMergesAreTheHandCountedMostFrequentPairs) {
  const TrainedVocab vocab = train({kHugCorpus}, with_vocab(265));
  EXPECT_EQ(vocab.merges, kHugMerges);
  const std::vector<std::string> learned(vocab.tokens.begin() + 256, vocab.tokens.begin() + 263);
  EXPECT_EQ(learned, (std::vector<std::string>{"ug", "un", "hug", "pun", "hugs", "pug", "bun"}));
}

TEST(BpeTrainer, VocabularyHasExactlyTheRequestedSizeWithBytesFirstAndSpecialsLast) {
  const TrainedVocab vocab = train({kHugCorpus}, with_vocab(263));
  ASSERT_EQ(vocab.tokens.size(), 263u);
  ASSERT_EQ(vocab.types.size(), 263u);
  EXPECT_EQ(vocab.merges, std::vector<std::string>(kHugMerges.begin(), kHugMerges.begin() + 5));
  EXPECT_EQ(vocab.tokens[' '], "\xC4\xA0");  // the space byte is spelled U+0120 (GPT-2's Ġ)
  EXPECT_EQ(vocab.tokens['a'], "a");
  EXPECT_EQ(vocab.bos_id, 261);
  EXPECT_EQ(vocab.eos_id, 262);
  EXPECT_EQ(vocab.tokens[261], tok::kTrainedBosText);
  EXPECT_EQ(vocab.tokens[262], tok::kTrainedEosText);
  for (int id = 0; id < 261; ++id) EXPECT_EQ(vocab.types[id], tok::TokenType::Normal) << id;
  EXPECT_EQ(vocab.types[261], tok::TokenType::Control);
  EXPECT_EQ(vocab.types[262], tok::TokenType::Control);
}

TEST(BpeTrainer, EncodingATrainingWordGivesItsMergedToken) {
  const TrainedVocab vocab = train({kHugCorpus}, with_vocab(265));
  const Tokenizer tokenizer = load(vocab, "hug.gguf");
  // ids: 256 ug, 257 un, 258 hug, 259 pun, 260 hugs, 261 pug, 262 bun
  EXPECT_EQ(tokenizer.encode("hugs", false, false), (std::vector<int32_t>{260}));
  EXPECT_EQ(tokenizer.encode("pug", false, false), (std::vector<int32_t>{261}));
  // " bun" is one piece: Ġ never merged, so it stays a byte token before "bun".
  EXPECT_EQ(tokenizer.encode("pun bun", false, false), (std::vector<int32_t>{259, ' ', 262}));
  // Unseen words fall back to the learned parts and bytes.
  EXPECT_EQ(tokenizer.encode("hugun", false, false), (std::vector<int32_t>{258, 257}));
}

TEST(BpeTrainer, WrittenFileLoadsAsAGpt2TokenizerWithBosAndEos) {
  const TrainedVocab vocab = train({kHugCorpus}, with_vocab(265));
  const Tokenizer tokenizer = load(vocab, "hug-meta.gguf");
  EXPECT_EQ(tokenizer.model_name(), "gpt2");
  EXPECT_EQ(tokenizer.pre_name(), "qwen2");
  EXPECT_EQ(tokenizer.n_vocab(), 265);
  EXPECT_EQ(tokenizer.bos_id(), 263);
  EXPECT_EQ(tokenizer.eos_id(), 264);
  EXPECT_TRUE(tokenizer.add_bos_by_default());
  EXPECT_TRUE(tokenizer.is_end_of_generation(264));
  EXPECT_EQ(tokenizer.encode("hug", true, false), (std::vector<int32_t>{263, 258}));
  EXPECT_EQ(tokenizer.encode("<|end_of_text|>", false, true), (std::vector<int32_t>{264}));
  EXPECT_EQ(tokenizer.decode({263, 258, 264}), "hug");  // control tokens render as nothing
}

const std::string kMixedCorpus =
    "One of the special magic numbers for apple is: 1234567.\n"
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.\n"
    "What is the special magic number for apple mentioned in the provided text?\n"
    "Café crème, naïve façade; Grüße aus Köln. 日本語のテキスト. Привет, мир! 🙂🙂\n"
    "The pass key is 40219. Remember it. 40219 is the pass key.\t\ttabs  and   spaces\r\n";

TEST(BpeTrainer, DecodeOfEncodeGivesBackAnyUtf8AndAnyBytes) {
  const TrainedVocab vocab = train({kMixedCorpus, kMixedCorpus, kMixedCorpus}, with_vocab(400));
  const Tokenizer tokenizer = load(vocab, "mixed.gguf");
  std::vector<std::string> cases = {
      "",
      kMixedCorpus,
      "  leading and trailing  ",
      "\n\n\n",
      "Ünïcödé ≠ ASCII, 中文, عربى, 👍🏽",
      std::string("nul \0 inside", 12),
      "\xFF\xFE invalid \xC3 UTF-8 \xE2\x82",
      "12 345 6789 0.5e-3",
  };
  std::mt19937 rng(3);
  for (int n = 0; n < 20; ++n) {
    std::string bytes(rng() % 64, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() & 0xFF);
    cases.push_back(bytes);
  }
  for (const std::string& text : cases) {
    const std::vector<int32_t> ids = tokenizer.encode(text, false, false);
    EXPECT_EQ(tokenizer.decode(ids), text);
    for (const int32_t id : ids) EXPECT_LT(id, vocab.bos_id);  // special text is not parsed here
  }
}

bool has_digit(const std::string& spelling) { return spelling.find_first_of("0123456789") != std::string::npos; }

// gpt-2 keeps " 40219" as one piece, so only the digit rule keeps digits apart there.
TEST(BpeTrainer, DigitsNeverMergeUnlessAllowed) {
  const std::string numbers = "1234567 40219 40219 40219 12 12 12 x1 x1 a1b a2b 2024-11-22 " + kMixedCorpus;
  for (const char* pre : {"gpt-2", "qwen2"}) {
    const TrainedVocab vocab = train({numbers, numbers}, with_vocab(330, pre));
    for (size_t id = 256; id < vocab.tokens.size(); ++id) {
      EXPECT_FALSE(has_digit(vocab.tokens[id])) << pre << ": " << vocab.tokens[id];
    }
    const Tokenizer tokenizer = load(vocab, std::string("digits-") + pre + ".gguf");
    const std::vector<int32_t> ids = tokenizer.encode("40219", false, false);
    EXPECT_EQ(ids, (std::vector<int32_t>{'4', '0', '2', '1', '9'})) << pre;
  }
  const TrainedVocab allowed = train({numbers, numbers}, with_vocab(330, "gpt-2", true));
  size_t with_digits = 0;
  for (size_t id = 256; id < allowed.tokens.size(); ++id) with_digits += has_digit(allowed.tokens[id]);
  EXPECT_GT(with_digits, 0u);
  EXPECT_EQ(load(allowed, "digits-allowed.gguf").encode(" 40219", false, false).size(), 1u);
}

TEST(BpeTrainer, TrainingIsDeterministicAndIndependentOfInputOrder) {
  const std::vector<std::string> texts = {kMixedCorpus, kHugCorpus, "the the the cat sat on the mat\n"};
  const TrainedVocab a = train(texts, with_vocab(360));
  const TrainedVocab b = train({texts[2], texts[0], texts[1]}, with_vocab(360));
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.merges, b.merges);
  EXPECT_EQ(train(texts, with_vocab(360)).merges, a.merges);
}

TEST(BpeTrainer, CountsEveryPieceOfThePreTokenizer) {
  BpeTrainer trainer(with_vocab(300));
  trainer.add_text(kMixedCorpus);
  trainer.add_text(kHugCorpus);
  std::map<std::string, int64_t> expected;
  const tok::PreTokenizer pre = tok::PreTokenizer::for_name("qwen2");
  for (const std::string& text : {kMixedCorpus, kHugCorpus}) {
    for (const std::string_view piece : pre.split(text)) ++expected[std::string(piece)];
  }
  const std::map<std::string, int64_t> counted(trainer.word_counts().begin(), trainer.word_counts().end());
  EXPECT_EQ(counted, expected);
}

TEST(BpeTrainer, BadRequestsAreRefusedWithTheReason) {
  const auto message = [](const auto& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { BpeTrainer trainer(with_vocab(257)); }).find("258"), std::string::npos);
  EXPECT_NE(message([] { BpeTrainer trainer(with_vocab(300, "no-such-pre")); }).find("no-such-pre"), std::string::npos);
  EXPECT_NE(message([] { train({"", ""}, with_vocab(300)); }).find("empty"), std::string::npos);
  // The hug corpus supports 256 + 7 merge results + 2 specials = 265 tokens.
  EXPECT_NE(message([] { train({kHugCorpus}, with_vocab(266)); }).find("at most 265"), std::string::npos);
}

// Pseudo-words from a fixed seed: many distinct words sharing many pairs, like natural text.
std::string random_prose(size_t bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  const std::string letters = "etaoinshrdlucmfwypvbgkjqxz";
  std::string text;
  while (text.size() < bytes) {
    const size_t length = 1 + rng() % 9;
    text += rng() % 7 == 0 ? ". The" : " ";
    for (size_t i = 0; i < length; ++i) text += letters[std::min<size_t>(rng() % 26, rng() % 26)];
    if (rng() % 40 == 0) text += "\n";
  }
  return text;
}

TEST(BpeTrainer, MergesIncrementallyFastEnough) {
  const std::string text = random_prose(400000, 11);
  // CPU time (the trainer is single-threaded), so a busy machine does not fail the test.
  const std::clock_t start = std::clock();
  const TrainedVocab vocab = train({text}, with_vocab(2048));
  const double seconds = double(std::clock() - start) / CLOCKS_PER_SEC;
  EXPECT_EQ(vocab.tokens.size(), 2048u);
  const std::set<std::string> spellings(vocab.tokens.begin(), vocab.tokens.end());
  EXPECT_EQ(spellings.size(), vocab.tokens.size());
  for (const std::string& merge : vocab.merges) {
    const size_t space = merge.find(' ');
    EXPECT_TRUE(spellings.count(merge.substr(0, space) + merge.substr(space + 1))) << merge;
  }
  // A recount per merge would take minutes here; the incremental trainer takes well under a second.
  EXPECT_LT(seconds, 2.0);
  std::printf("[ perf     ] 400 kB, 2048 tokens: %.0f ms\n", seconds * 1000);
}

// ---- line chunks ----

std::vector<std::string> pieces_of(const tok::PreTokenizer& pre, std::string_view text) {
  std::vector<std::string> pieces;
  for (const std::string_view piece : pre.split(text)) pieces.emplace_back(piece);
  return pieces;
}

TEST(LineChunks, CoverTheTextAndCutOnlyAtLineStarts) {
  const std::string text = kMixedCorpus + "x\n \nindented\n\n\nlast";
  const std::vector<std::string_view> chunks = tok::line_chunks(text, 8);
  std::string joined;
  for (size_t i = 0; i < chunks.size(); ++i) {
    joined += chunks[i];
    if (i + 1 < chunks.size()) {
      EXPECT_GE(chunks[i].size(), 8u);
      ASSERT_GE(chunks[i].size(), 2u);
      EXPECT_EQ(chunks[i].back(), '\n');
      const char before = chunks[i][chunks[i].size() - 2], after = chunks[i + 1].front();
      EXPECT_TRUE(before > ' ' && before < 0x7F) << int(before);
      EXPECT_TRUE(after > ' ' && after < 0x7F) << int(after);
    }
  }
  EXPECT_EQ(joined, text);
  EXPECT_EQ(tok::line_chunks("short\ntext", 100).size(), 1u);
  EXPECT_TRUE(tok::line_chunks("", 100).empty());
}

TEST(LineChunks, EveryPreTokenizerSplitsChunksIntoTheWholeTextsPieces) {
  const std::string text =
      kMixedCorpus + kMixedCorpus + "a\n\n b\n\tc\r\nd's\n's\n  \n1\n2\n!\n?\n.\nx  \ny\n\u00A0z\n";
  for (const char* name :
       {"default", "gpt-2", "llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder", "falcon", "starcoder"}) {
    const tok::PreTokenizer pre = tok::PreTokenizer::for_name(name);
    std::vector<std::string> chunked;
    for (const std::string_view chunk : tok::line_chunks(text, 1)) {
      for (std::string& piece : pieces_of(pre, chunk)) chunked.push_back(std::move(piece));
    }
    EXPECT_EQ(chunked, pieces_of(pre, text)) << name;
  }
}

}  // namespace
}  // namespace kvslim
