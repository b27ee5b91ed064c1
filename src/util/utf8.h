// Minimal UTF-8 helpers shared by the tokenizers, the Jinja interpreter and the text metrics
// (in util/ so that every layer may use them). Invalid input never throws: a byte that does
// not start a well-formed sequence decodes as U+FFFD and consumes exactly one byte, so every
// input byte belongs to exactly one decoded character and byte ranges survive round trips.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvslim {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Decodes the character starting at text[pos] and advances pos past it.
uint32_t decode_utf8(std::string_view text, size_t& pos);

void append_utf8(std::string& out, uint32_t cp);

// Byte length of the character starting at text[pos] (1 for invalid bytes), as decode_utf8
// would consume it.
size_t utf8_char_length(std::string_view text, size_t pos);

}  // namespace kvslim
