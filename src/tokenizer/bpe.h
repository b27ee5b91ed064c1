// Byte-level BPE merging for `gpt2` vocabularies: the merge list from tokenizer.ggml.merges
// ranks adjacent token pairs; within one pre-tokenized word the lowest-ranked adjacent pair is
// merged first (ties: leftmost), until no ranked pair is left.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"

namespace kvslim::tok {

class BpeMerges {
 public:
  // Each merge is "left right". Like Hugging Face, a merge only counts when both parts and
  // their concatenation are vocabulary tokens; other lines are ignored.
  BpeMerges(const Vocab& vocab, const std::vector<std::string>& merges);

  // Appends the ids for one word, given in its byte-level spelling. Characters that are not
  // tokens become unk_id (or are dropped when it is -1).
  void encode_word(const Vocab& vocab, int32_t unk_id, std::string_view word, std::vector<int32_t>& out) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t key(int32_t left, int32_t right) {
    return (uint64_t{static_cast<uint32_t>(left)} << 32) | static_cast<uint32_t>(right);
  }
  const Merge* find(int32_t left, int32_t right) const;

  std::unordered_map<uint64_t, Merge> merges_;
};

}  // namespace kvslim::tok
