// Element types kvslim computes with, their conversions, and views of weight matrices in their
// stored type (weights are never inflated to f32 in memory).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvslim {

enum class DType : uint8_t { F32, F16, BF16, Q8_0 };

// ggml type id <-> DType; dtype_from_ggml throws kvslim::Error naming unsupported types.
DType dtype_from_ggml(uint32_t type_id);
uint32_t ggml_type_id(DType type);
const char* dtype_name(DType type);          // "f32", "f16", "bf16", "q8_0"
DType dtype_from_name(const char* name);     // inverse of dtype_name; throws on unknown names

constexpr int kQ8Block = 32;
struct BlockQ8_0 {
  uint16_t scale_f16;  // d, as IEEE half
  int8_t q[kQ8Block];  // value = d * q
};
static_assert(sizeof(BlockQ8_0) == 34);

// Bytes of one row of `n` elements (n must be a multiple of 32 for Q8_0).
size_t row_bytes(DType type, int64_t n);

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);  // round to nearest even
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);  // round to nearest even

// Converts `n` floats into `type` (quantising for Q8_0 exactly as ggml: d = amax/127,
// q = round(x/d)) and back.
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
