#include "tokenizer/byte_unicode.h"

#include <array>

#include "util/utf8.h"

namespace kvslim::tok {

namespace {

struct ByteMap {
  std::array<std::string, 256> spelling;  // byte -> UTF-8 of its code point
  std::array<int16_t, 512> byte_of{};     // code point -> byte (all mapped code points are < 512)

  ByteMap() {
    byte_of.fill(-1);
    const auto keeps_itself = [](int b) {
      return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    uint32_t next_shifted = 256;  // the other bytes take U+0100, U+0101, ... in byte order
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = keeps_itself(b) ? static_cast<uint32_t>(b) : next_shifted++;
      append_utf8(spelling[b], cp);
      byte_of[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

void append_byte_level(std::string& out, std::string_view bytes) {
  const ByteMap& map = byte_map();
  for (const char c : bytes) out += map.spelling[static_cast<unsigned char>(c)];
}

int byte_level_to_byte(uint32_t cp) { return cp < byte_map().byte_of.size() ? byte_map().byte_of[cp] : -1; }

std::string byte_level_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    const int byte = byte_level_to_byte(decode_utf8(text, pos));
    if (byte >= 0) {
      out += static_cast<char>(byte);
    } else {
      out.append(text.substr(start, pos - start));
    }
  }
  return out;
}

}  // namespace kvslim::tok
