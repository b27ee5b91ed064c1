// A byte-level BPE vocabulary built by kvslim (see bpe_trainer.h) and the `tokenizer.ggml.*`
// metadata that makes it a standard `gpt2` GGUF tokenizer, loaded by Tokenizer::from_gguf like
// any converted model's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/vocab.h"

namespace kvslim::tok {

// The special tokens every trained vocabulary ends with (Llama 3's spellings, so generation
// stops at EOS even for readers that only know the usual end markers).
inline constexpr const char* kTrainedBosText = "<|begin_of_text|>";
inline constexpr const char* kTrainedEosText = "<|end_of_text|>";

struct TrainedVocab {
  std::string pre;                  // tokenizer.ggml.pre: the pre-tokenizer the merges were learned with
  std::vector<std::string> tokens;  // by id, in the byte-level alphabet (byte_unicode.h)
  std::vector<TokenType> types;     // Normal, or Control for BOS/EOS
  std::vector<std::string> merges;  // "left right", best (earliest learned) first
  int32_t bos_id = -1;
  int32_t eos_id = -1;
};

// Sets tokenizer.ggml.model ("gpt2"), pre, tokens, token_type, merges, bos/eos ids and
// add_bos_token (true: models trained on this vocabulary see BOS first).
void write_tokenizer_metadata(gguf::Writer& writer, const TrainedVocab& vocab);

// Writes a tokenizer-only GGUF file (what `init-model --vocab-from` and `tokenize -m` read).
void write_tokenizer_gguf(const TrainedVocab& vocab, const std::string& path);

}  // namespace kvslim::tok
