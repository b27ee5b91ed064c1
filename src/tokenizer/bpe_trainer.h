// Trains a small byte-level BPE vocabulary (the `gpt2` tokenizer model) from text, for the
// models kvslim trains itself.
//
// The text is cut into pieces by a supported pre-tokenizer (tokenizer.ggml.pre), each piece is a
// word spelled in the 256 byte tokens, and the trainer repeatedly merges the adjacent token pair
// that occurs most often in the counted words, each merge replacing every (non-overlapping, left
// to right) occurrence, until the vocabulary holds vocab_size tokens: the 256 byte tokens (id =
// byte value), one token per new merge result, then BOS and EOS.
//
// Tie-break: among equally frequent pairs the lexicographically smallest wins, comparing the
// left tokens' vocabulary spellings (byte-level alphabet, compared as bytes) first, then the
// right ones'. Training is therefore deterministic and independent of input order.
//
// Digits: unless allow_digit_merges is set, no pair containing an ASCII digit '0'..'9' is ever
// merged, so every digit stays its own token (numbers are read digit by digit, which makes
// retrieving them far easier to learn).
//
// Pair counts are kept up to date incrementally: a merge only revisits the words containing the
// merged pair, and a max-heap with lazily refreshed counts finds the next best pair.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "tokenizer/pretokenize.h"
#include "tokenizer/trained_vocab.h"

namespace kvslim::tok {

struct BpeTrainerOptions {
  int32_t vocab_size = 2048;  // all tokens: 256 bytes + merge results + BOS + EOS
  std::string pre = "qwen2";  // Llama-3 style words and punctuation, every digit its own piece
  bool allow_digit_merges = false;
};

class BpeTrainer {
 public:
  // The smallest vocabulary: the 256 byte tokens and the two special tokens.
  static constexpr int32_t kMinVocabSize = 258;

  // Throws kvslim::Error for a vocabulary below kMinVocabSize or an unknown pre-tokenizer.
  explicit BpeTrainer(BpeTrainerOptions options);

  // Pre-tokenizes one document (texts added separately never share a piece) and counts its
  // pieces.
  void add_text(std::string_view text);

  // Throws kvslim::Error when no text was added or when the text runs out of pairs to merge
  // before the vocabulary is full (it names the largest vocabulary the text supports).
  TrainedVocab train() const;

  // Each distinct piece seen so far (raw bytes) and how often it occurred.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using WordCounts = std::unordered_map<std::string, int64_t, Hash, std::equal_to<>>;
  const WordCounts& word_counts() const { return words_; }

 private:
  BpeTrainerOptions options_;
  PreTokenizer pre_;
  WordCounts words_;
};

}  // namespace kvslim::tok
