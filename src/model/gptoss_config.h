// gpt-oss's metadata beyond the llama-family keys, read as llama.cpp reads them
// (llama_model_openai_moe::load_arch_hparams and the generic rope keys): the sliding window and
// which layers slide (period 2 by default: even layers slide, odd layers are full), the local
// layers' RoPE base, and YaRN RoPE scaling with llama.cpp's attention factor.
#pragma once

#include "gguf/gguf.h"

namespace kvslim {

struct ModelConfig;

// Fills the gpt-oss fields of `c` (whose generic keys, rope.scaling.attn_factor and
// rope.scaling.original_context_length are already read). Throws kvslim::Error naming the key for
// a missing or out-of-range window, a pattern that does not fit the layers, an unknown
// rope.scaling.type, or a rope.dimension_count other than the head size (llama.cpp sizes gpt-oss's
// heads by it).
void read_gptoss_config(const gguf::File& file, ModelConfig& c);
// Writes the keys read_gptoss_config reads back to the same config (window, pattern period, local
// RoPE base, YaRN scaling).
void write_gptoss_config(const ModelConfig& c, gguf::Writer& writer);

// Whether `layer` slides in llama.cpp's default gpt-oss layout (no pattern key: period 2, so the
// even layers slide and the odd ones are full).
bool gptoss_layer_slides(int layer);

// llama.cpp's yarn_attn_factor for a YaRN factor (1 / freq_scale) and the file's
// rope.scaling.attn_factor: get_mscale(factor) / (1 + 0.1 ln factor) * attn_factor, where
// get_mscale(f) = 1 + 0.1 ln f for f > 1, else 1. (ggml's rope_yarn multiplies the rotated values
// by 1 + 0.1 ln factor again, so their net scale is get_mscale(factor) * attn_factor.)
float yarn_attn_factor(float factor, float attn_factor);

}  // namespace kvslim
