// Gemma 3's metadata beyond the llama-family keys, read and written as llama.cpp names them:
// the sliding window and which layers use it, the local layers' RoPE base, linear RoPE scaling
// of the global layers, the attention scale and the final logit soft-capping.
#pragma once

#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace kvslim {

struct ModelConfig;

// Fills the gemma3 fields of `c` (whose generic keys are already read). Throws kvslim::Error
// naming the key for a window larger than the context, a pattern of the wrong length or an
// unsupported RoPE scaling type.
void read_gemma3_config(const gguf::File& file, ModelConfig& c);
// Writes `gemma3.attention.sliding_window` (and the scaling factor when not 1) as llama.cpp's
// converter does: neither the pattern nor the local RoPE base, whose defaults apply.
void write_gemma3_config(const ModelConfig& c, gguf::Writer& writer);

// Which layers slide, from `key` (attention.sliding_window_pattern) stored as a period (llama.cpp's
// reading: gemma3_layer_is_local) or as one bool per layer (true: local), `default_period` when
// absent (gemma3: 6, gpt-oss: 2). Throws naming the key for a period or array that does not fit
// the n_layers layers. Shared by gemma3 and gpt-oss.
std::vector<bool> local_layers(const gguf::File& file, const std::string& key, int n_layers, int default_period);

// llama.cpp's default layer pattern: of every `period` layers the last is global, the others
// local (period 6: layers 5, 11, 17, ... are global); period 0 makes every layer local.
bool gemma3_layer_is_local(int layer, int period);

}  // namespace kvslim
