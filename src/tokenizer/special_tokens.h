// Splits text at occurrences of special tokens' spellings before the text is tokenized, the
// way llama.cpp does: special tokens are tried longest spelling first, and each one splits
// every remaining raw-text fragment at all its (non-overlapping, left to right) occurrences.
// Control and unknown tokens take part only when parsing special tokens; user-defined tokens
// always do (Hugging Face matches added tokens before pre-tokenization too).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"

namespace kvslim::tok {

// A piece of the input: a special token (token >= 0) or a raw text range still to tokenize.
struct Fragment {
  int32_t token = -1;
  size_t offset = 0;
  size_t length = 0;
};

class SpecialTokenSplitter {
 public:
  explicit SpecialTokenSplitter(const Vocab& vocab);

  std::vector<Fragment> split(std::string_view text, bool parse_special) const;

 private:
  struct Candidate {
    int32_t id;
    std::string text;
    bool always;  // user-defined: matched even without parse_special
  };

  // Per candidate: whether it occurs somewhere in `text` and may be matched at all.
  std::vector<bool> occurring(std::string_view text, bool parse_special) const;

  std::vector<Candidate> candidates_;  // longest spelling first
  // A byte trie over the candidates' spellings, so finding which of possibly thousands of
  // special tokens occur in a text costs one pass over the text instead of one per token.
  std::unordered_map<uint64_t, uint32_t> edges_;  // (node << 8 | byte) -> child node
  std::vector<int32_t> terminal_;                 // node -> candidate index ending there, or -1
};

}  // namespace kvslim::tok
