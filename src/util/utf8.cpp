#include "util/utf8.h"

namespace kvslim {

namespace {

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

}  // namespace

uint32_t decode_utf8(std::string_view text, size_t& pos) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(pos);
  size_t len = 0;
  uint32_t cp = 0;
  uint32_t min_cp = 0;  // smallest value that needs this length; shorter encodings are invalid
  if (lead < 0x80) {
    pos += 1;
    return lead;
  } else if ((lead & 0xE0) == 0xC0) {
    len = 2, cp = lead & 0x1F, min_cp = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    len = 3, cp = lead & 0x0F, min_cp = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    len = 4, cp = lead & 0x07, min_cp = 0x10000;
  } else {
    pos += 1;
    return kReplacementChar;
  }
  if (pos + len > text.size()) {
    pos += 1;
    return kReplacementChar;
  }
  for (size_t i = 1; i < len; ++i) {
    if (!is_continuation(byte(pos + i))) {
      pos += 1;
      return kReplacementChar;
    }
    cp = (cp << 6) | (byte(pos + i) & 0x3F);
  }
  if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    pos += 1;
    return kReplacementChar;
  }
  pos += len;
  return cp;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t utf8_char_length(std::string_view text, size_t pos) {
  size_t end = pos;
  decode_utf8(text, end);
  return end - pos;
}

}  // namespace kvslim
