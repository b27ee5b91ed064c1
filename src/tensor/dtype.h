// Element types kvslim computes with, their conversions, and views of weight matrices in their
// stored type (weights are never inflated to f32 in memory).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/quant_blocks.h"

namespace kvslim {

// Q4_0 .. Q6_K, IQ4_NL, IQ4_XS and MXFP4 are ggml's block-quantised weight types (layouts in
// tensor/quant_blocks.h).
enum class DType : uint8_t {
  F32,
  F16,
  BF16,
  Q8_0,
  Q4_0,
  Q4_1,
  Q5_0,
  Q5_1,
  Q2_K,
  Q3_K,
  Q4_K,
  Q5_K,
  Q6_K,
  IQ4_NL,
  IQ4_XS,
  MXFP4
};

// Every DType, in enum order (for tables, tests and name lookups).
inline constexpr DType kAllDTypes[] = {DType::F32,  DType::F16,    DType::BF16,   DType::Q8_0, DType::Q4_0, DType::Q4_1,
                                       DType::Q5_0, DType::Q5_1,   DType::Q2_K,   DType::Q3_K, DType::Q4_K, DType::Q5_K,
                                       DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4};

// ggml type id <-> DType; dtype_from_ggml throws kvslim::Error naming unsupported types.
DType dtype_from_ggml(uint32_t type_id);
uint32_t ggml_type_id(DType type);
const char* dtype_name(DType type);  // "f32", "f16", "bf16", "q8_0", "q4_0", ..., "q6_k", "iq4_nl", "iq4_xs", "mxfp4"
DType dtype_from_name(const char* name);  // inverse of dtype_name; throws on unknown names

// Values per block (1 for f32/f16/bf16, 32 for q8_0, the legacy types, iq4_nl and mxfp4, 256 for K-quants and iq4_xs)
// and bytes per block. A row must hold whole blocks.
int64_t dtype_block_size(DType type);
size_t dtype_block_bytes(DType type);
inline bool dtype_is_quantized(DType type) { return dtype_block_size(type) > 1; }
// Bits per weight, including the block scales (e.g. 4.5 for q4_0).
double dtype_bits_per_weight(DType type);

constexpr int kQ8Block = 32;
struct BlockQ8_0 {
  uint16_t scale_f16;  // d, as IEEE half
  int8_t q[kQ8Block];  // value = d * q
};
static_assert(sizeof(BlockQ8_0) == 34);

// Bytes of one row of `n` elements; throws if n is not a whole number of the type's blocks.
size_t row_bytes(DType type, int64_t n);

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);  // round to nearest even
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);  // round to nearest even

// Converts `n` floats into `type` and back (n must be whole blocks of the type). Quantisation
// follows ggml's reference quantisers without importance matrix (llama-quantize's default path):
// q8_0 d = amax/127, q = round(x/d); q4_0/q5_0 scale from the signed absolute maximum;
// q4_1/q5_1 from min/max; K-quants search each sub-block's scale (and min) iteratively and
// then quantise the sub-block scales against the super-block factor(s).
void convert_from_f32(const float* src, DType type, void* dst, int64_t n);
void convert_to_f32(DType type, const void* src, float* dst, int64_t n);

// A row-major matrix in its stored type: `rows` rows of `cols` elements, each row
// row_bytes(type, cols) bytes. For a linear layer y = W x, rows = outputs, cols = inputs
// (ggml's ne1 and ne0).
struct WeightView {
  DType type = DType::F32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;

  const uint8_t* row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + static_cast<size_t>(r) * row_bytes(type, cols);
  }
};

}  // namespace kvslim
