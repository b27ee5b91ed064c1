// SentencePiece-style tokenization as llama.cpp does it for `llama` vocabularies: start from the
// UTF-8 characters and repeatedly merge the adjacent pair whose concatenation is a vocabulary
// piece with the highest score (ties: leftmost pair). Pieces that end up outside the vocabulary
// fall back to byte tokens <0xXX>, or to the unknown token when there is no byte token.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace kvslim::tok {

// `text` must already have its spaces replaced by U+2581 (and any space prefix added).
// unk_id may be -1: characters with neither a piece nor byte tokens are then dropped.
void spm_tokenize(const Vocab& vocab, int32_t unk_id, std::string_view text, std::vector<int32_t>& out);

}  // namespace kvslim::tok
