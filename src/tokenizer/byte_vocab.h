// A built-in SentencePiece-style vocabulary that can encode any text: <unk>, <s>, </s>, the 256
// byte tokens <0x00>..<0xFF>, and a few word pieces. Used by init-model when no vocabulary file
// is given, and by the tests.
#pragma once

#include "gguf/gguf.h"

namespace kvslim {

// Sets the tokenizer.ggml.* keys of the built-in vocabulary (BOS 1, EOS 2, unknown 0).
int add_byte_vocab(gguf::Writer& writer);

}  // namespace kvslim
