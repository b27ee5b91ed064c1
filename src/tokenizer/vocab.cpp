#include "tokenizer/vocab.h"

#include <fmt/format.h>

#include "util/error.h"

namespace kvslim::tok {

namespace {

constexpr const char* kTokensKey = "tokenizer.ggml.tokens";
constexpr const char* kScoresKey = "tokenizer.ggml.scores";
constexpr const char* kTypesKey = "tokenizer.ggml.token_type";

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  const int hi = hex_digit(text[3]);
  const int lo = hex_digit(text[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

Vocab Vocab::from_gguf(const gguf::File& file) {
  std::vector<std::string> texts = file.get_string_array(kTokensKey);
  if (texts.empty()) fail("{}: {} is empty", file.path(), kTokensKey);
  if (texts.size() > static_cast<size_t>(INT32_MAX)) {
    fail("{}: {} has {} entries, more than token ids can address", file.path(), kTokensKey, texts.size());
  }

  std::vector<float> scores;
  if (file.find(kScoresKey) != nullptr) {
    scores = file.get_float_array(kScoresKey);
    if (scores.size() != texts.size()) {
      fail("{}: {} has {} entries but there are {} tokens", file.path(), kScoresKey, scores.size(), texts.size());
    }
  }
  std::vector<int64_t> types;
  if (file.find(kTypesKey) != nullptr) {
    types = file.get_int_array(kTypesKey);
    if (types.size() != texts.size()) {
      fail("{}: {} has {} entries but there are {} tokens", file.path(), kTypesKey, types.size(), texts.size());
    }
  }

  Vocab vocab;
  vocab.byte_tokens_.fill(-1);
  vocab.tokens_.resize(texts.size());
  vocab.ids_.reserve(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto id = static_cast<int32_t>(i);
    TokenData& token = vocab.tokens_[i];
    token.text = std::move(texts[i]);
    if (!scores.empty()) token.score = scores[i];
    if (!types.empty()) {
      // Types outside the known range behave like Undefined: never produced, rendered as "".
      const int64_t type = types[i];
      token.type = type >= 0 && type <= static_cast<int64_t>(TokenType::Byte) ? static_cast<TokenType>(type)
                                                                              : TokenType::Undefined;
    }
    // Some converted vocabularies repeat a spelling; the first id wins, as a lookup must be
    // deterministic and the earlier id is the one the original tokenizer would produce.
    vocab.ids_.emplace(token.text, id);
    if (token.type == TokenType::Byte) {
      const int byte = parse_byte_token(token.text);
      if (byte >= 0 && vocab.byte_tokens_[byte] < 0) vocab.byte_tokens_[byte] = id;
    }
  }
  // Vocabularies without token types still use "<0xXX>" pieces as byte fallback.
  if (types.empty()) {
    for (int b = 0; b < 256; ++b) vocab.byte_tokens_[b] = vocab.find(fmt::format("<0x{:02X}>", b));
  }
  return vocab;
}

int32_t Vocab::find(std::string_view text) const {
  const auto it = ids_.find(text);
  return it == ids_.end() ? -1 : it->second;
}

}  // namespace kvslim::tok
