// Tokenizers built from a GGUF file's `tokenizer.ggml.*` metadata: SentencePiece-style
// (`llama`) and byte-level BPE (`gpt2`) with the pre-tokenizer named by `tokenizer.ggml.pre`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"

namespace kvslim {

class Tokenizer {
 public:
  // Throws kvslim::Error naming the missing/invalid key or an unsupported model/pre-tokenizer.
  static Tokenizer from_gguf(const gguf::File& file);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // add_bos: prepend BOS (callers pass add_bos_by_default() unless told otherwise).
  // parse_special: text matching a special/control token's piece becomes that token.
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const;

  // The bytes a token stands for (byte tokens give their raw byte, SentencePiece's U+2581
  // becomes a space, byte-level BPE's unicode bytes are mapped back). Control tokens give ""
  // unless render_special is true.
  std::string token_to_piece(int32_t id, bool render_special = false) const;
  std::string decode(const std::vector<int32_t>& ids, bool render_special = false) const;

  int32_t n_vocab() const;
  int32_t bos_id() const;                       // -1 when the vocabulary has none
  int32_t eos_id() const;                       // -1 when the vocabulary has none
  bool is_end_of_generation(int32_t id) const;  // EOS, EOT and other end-of-generation tokens
  bool add_bos_by_default() const;
  const std::string& model_name() const;  // "llama" or "gpt2"
  const std::string& pre_name() const;    // tokenizer.ggml.pre, "default" when absent

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvslim
