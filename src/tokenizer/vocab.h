// The token table of a GGUF vocabulary: each id's text, score and type, plus text -> id lookup.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/gguf.h"

namespace kvslim::tok {

// Values of tokenizer.ggml.token_type (the SentencePiece piece types).
enum class TokenType : int32_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

struct TokenData {
  std::string text;
  float score = 0.0f;
  TokenType type = TokenType::Normal;
};

class Vocab {
 public:
  // Reads tokenizer.ggml.tokens and, when present, tokenizer.ggml.scores / token_type.
  static Vocab from_gguf(const gguf::File& file);

  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }
  bool contains(int32_t id) const { return id >= 0 && id < size(); }
  const TokenData& token(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }

  // Id of the token spelled exactly `text`, or -1.
  int32_t find(std::string_view text) const;
  // Id of the SentencePiece byte token "<0xXX>" for `byte`, or -1.
  int32_t byte_token(uint8_t byte) const { return byte_tokens_[byte]; }

 private:
  struct TextHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  std::vector<TokenData> tokens_;
  std::unordered_map<std::string, int32_t, TextHash, std::equal_to<>> ids_;
  std::array<int32_t, 256> byte_tokens_{};
};

// The raw byte of a "<0xXX>" byte token, or -1 if `text` is not spelled that way.
int parse_byte_token(std::string_view text);

}  // namespace kvslim::tok
