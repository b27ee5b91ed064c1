// GPT-2's reversible byte <-> unicode mapping used by byte-level BPE vocabularies: every byte
// gets a printable code point (printable Latin-1 bytes map to themselves, the rest to U+0100
// upwards), so arbitrary bytes can be spelled with vocabulary strings.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvslim::tok {

// Appends the byte-level spelling of `bytes` to `out`.
void append_byte_level(std::string& out, std::string_view bytes);

// The byte a code point stands for in the byte-level alphabet, or -1 if it is not part of it.
int byte_level_to_byte(uint32_t cp);

// Decodes a byte-level vocabulary string back to raw bytes; code points outside the alphabet
// are kept as their own UTF-8 (they only occur in hand-added tokens).
std::string byte_level_decode(std::string_view text);

}  // namespace kvslim::tok
