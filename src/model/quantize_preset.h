// Which type each tensor of a model gets under a quantization preset (`kvslim quantize --type`).
// The presets are llama.cpp's (llama-quantize's file types: llama_tensor_get_type in its
// src/llama-quant.cpp, read to learn the rules; this is a re-statement, not a copy), restricted
// to dense llama/qwen models, so a file quantized here has the same per-tensor types as the same
// file quantized by llama-quantize without an importance matrix.
//
// The table (n = block_count, i = the tensor's layer; "more bits" layers are
// i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2; gqa = head_count / head_count_kv):
//
//   preset  base   output.weight(*)  attn_v.weight            ffn_down.weight          attn_output.weight
//   q8_0    q8_0   q8_0              -                        -                        -
//   q4_0    q4_0   q6_k              -                        -                        -
//   q4_1    q4_1   q6_k              -                        -                        -
//   q5_0    q5_0   q6_k              -                        -                        -
//   q5_1    q5_1   q6_k              -                        -                        -
//   q2_k    q2_k   q6_k              q4_k if gqa >= 4 else q3_k  q3_k                  q3_k
//   q3_k_s  q3_k   q6_k              -                        -                        -
//   q3_k_m  q3_k   q6_k              q5_k if i < 2 else q4_k  q5_k if i < n/16 else q4_k  q4_k
//   q4_k_s  q4_k   q6_k              q5_k if i < 4            q5_k if i < n/8          -
//   q4_k_m  q4_k   q6_k              q6_k on more-bits layers q6_k on more-bits layers -
//   q5_k_s  q5_k   q6_k              -                        -                        -
//   q5_k_m  q5_k   q6_k              q6_k on more-bits layers q6_k on more-bits layers -
//   q6_k    q6_k   q6_k              -                        -                        -
//   iq4_nl  iq4_nl q6_k              q5_k if gqa >= 4         q5_k if i < n/8          -
//   iq4_xs  iq4_xs q6_k              q5_k if gqa >= 4         q5_k if i < n/8          -
//   mxfp4_moe  expert tensors (3-D, ne2 > 1) mxfp4, every other matrix q8_0, output q8_0
//              (llama.cpp's MXFP4_MOE, file type 38)
//   mxfp4   mxfp4  q8_0              -                        -                        -
//           (kvslim's own: every matrix mxfp4 but the output, e.g. to measure mxfp4 on a dense
//           model; written with file type 38 too, which llama.cpp reads as "MXFP4 MoE")
//   ("-": the base type.)
// A tensor already stored as mxfp4 is always copied as it is, whatever the preset (mxfp4 is a
// training-time format: gpt-oss ships its experts in it, and requantizing would only lose).

//   (*) output.weight, or token_embd.weight when the model has no output.weight (tied
//   embeddings): q8_0 when its rows are not whole blocks of the base type. token_embd.weight of
//   an untied model gets the base type like every other matrix.
//
// Only 2-D (or higher) tensors whose name ends in "weight" and does not contain "_norm.weight"
// are quantized; norms, biases and rope_freqs stay as they are.
//
// Fallback when a row (ne0) is not a whole number of the chosen type's blocks (K-quants: 256):
//   q4_k -> q5_0, q5_k -> q5_1, q6_k -> q8_0, iq4_xs -> iq4_nl (as llama.cpp);
//   q2_k, q3_k -> q4_0 (as llama.cpp);
//   and f16 when even the 32-value fallback does not fit (llama.cpp does the same for the
//   K-quant fallbacks; for a legacy base type it refuses the file, kvslim falls back instead).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace kvslim {

enum class QuantPreset {
  Q8_0,
  Q4_0,
  Q4_1,
  Q5_0,
  Q5_1,
  Q2_K,
  Q3_K_S,
  Q3_K_M,
  Q4_K_S,
  Q4_K_M,
  Q5_K_S,
  Q5_K_M,
  Q6_K,
  IQ4_NL,
  IQ4_XS,
  MXFP4_MOE,
  MXFP4
};

struct QuantPresetInfo {
  QuantPreset preset;
  const char* name;      // "q4_k_m"
  DType base;            // the type of every matrix the rules do not single out
  uint32_t llama_ftype;  // general.file_type (llama.cpp's LLAMA_FTYPE_MOSTLY_*)
};

const std::vector<QuantPresetInfo>& quant_presets();
// Throws kvslim::Error naming the unknown preset and listing the valid ones.
const QuantPresetInfo& quant_preset_from_name(const std::string& name);

// What the rules need to know about the model and the tensor.
struct TensorRole {
  std::string name;
  int layer = -1;  // from "blk.N."; -1 outside the blocks
  int n_layers = 1;
  int gqa = 1;  // head_count / head_count_kv
  bool model_has_output = true;
  int64_t row_length = 0;  // ne0
  bool expert = false;     // a stack of expert matrices (3-D, ne2 > 1)
};

struct TensorTypeChoice {
  DType type;    // what is written
  DType wanted;  // what the preset asked for (differs from type after a fallback)
  bool fallback = false;
};

// Whether llama-quantize would quantize a tensor of this name and shape at all.
bool is_quantizable_tensor(const std::string& name, const std::vector<uint64_t>& dims);

// The layer index of "blk.N.<...>", or -1.
int tensor_layer(const std::string& name);

TensorTypeChoice choose_tensor_type(const QuantPresetInfo& preset, const TensorRole& role);

}  // namespace kvslim
