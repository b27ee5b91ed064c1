#include "tokenizer/trained_vocab.h"

namespace kvslim::tok {

void write_tokenizer_metadata(gguf::Writer& writer, const TrainedVocab& vocab) {
  std::vector<int32_t> types;
  types.reserve(vocab.types.size());
  for (const TokenType type : vocab.types) types.push_back(static_cast<int32_t>(type));
  writer.set("tokenizer.ggml.model", gguf::Value::of_string("gpt2"));
  writer.set("tokenizer.ggml.pre", gguf::Value::of_string(vocab.pre));
  writer.set("tokenizer.ggml.tokens", gguf::Value::of_string_array(vocab.tokens));
  writer.set("tokenizer.ggml.token_type", gguf::Value::of_i32_array(types));
  writer.set("tokenizer.ggml.merges", gguf::Value::of_string_array(vocab.merges));
  writer.set("tokenizer.ggml.bos_token_id", gguf::Value::of_u32(static_cast<uint32_t>(vocab.bos_id)));
  writer.set("tokenizer.ggml.eos_token_id", gguf::Value::of_u32(static_cast<uint32_t>(vocab.eos_id)));
  writer.set("tokenizer.ggml.add_bos_token", gguf::Value::of_bool(true));
}

void write_tokenizer_gguf(const TrainedVocab& vocab, const std::string& path) {
  gguf::Writer writer;
  writer.set("general.name", gguf::Value::of_string("kvslim byte-level BPE tokenizer"));
  write_tokenizer_metadata(writer, vocab);
  writer.write(path);
}

}  // namespace kvslim::tok
