#include "tokenizer/byte_vocab.h"

#include <cstdio>

namespace kvslim {

int add_byte_vocab(gguf::Writer& w) {
  // Token types as in llama.cpp: 1 normal, 2 unknown, 3 control, 6 byte.
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char piece[8];
    std::snprintf(piece, sizeof piece, "<0x%02X>", b);
    tokens.push_back(piece);
    scores.push_back(0);
    types.push_back(6);
  }
  // U+2581 marks a word start in SentencePiece pieces.
  for (const char* word : {"\xE2\x96\x81",
                           "\xE2\x96\x81"
                           "the",
                           "\xE2\x96\x81"
                           "cat",
                           "e", "t", "h", "c", "a"}) {
    tokens.push_back(word);
    scores.push_back(-float(tokens.size()));
    types.push_back(1);
  }
  w.set("tokenizer.ggml.model", gguf::Value::of_string("llama"));
  w.set("tokenizer.ggml.tokens", gguf::Value::of_string_array(tokens));
  w.set("tokenizer.ggml.scores", gguf::Value::of_f32_array(scores));
  w.set("tokenizer.ggml.token_type", gguf::Value::of_i32_array(types));
  w.set("tokenizer.ggml.bos_token_id", gguf::Value::of_u32(1));
  w.set("tokenizer.ggml.eos_token_id", gguf::Value::of_u32(2));
  w.set("tokenizer.ggml.unknown_token_id", gguf::Value::of_u32(0));
  return int(tokens.size());
}

}  // namespace kvslim
