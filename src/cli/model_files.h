// Files that travel with a model: its LookaheadKV adapter lives beside it as MODEL.lookahead.gguf
// (`kvslim train-lookahead` writes it there), so `claims` and `demo` pick it up without a flag.
#pragma once

#include <string>

namespace kvslim::cli {

// MODEL's adapter path (models/x.gguf -> models/x.lookahead.gguf) when that file exists, else "".
std::string adapter_beside(const std::string& model);

}  // namespace kvslim::cli
