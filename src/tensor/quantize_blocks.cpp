// Quantisation of f32 rows into the legacy block types q4_0, q4_1, q5_0, q5_1, following ggml's
// reference quantisers (what llama-quantize uses without an importance matrix): q4_0/q5_0 take
// the scale from the value of largest magnitude *with its sign* (d = max / -8 or / -16), so that
// value lands exactly on the extreme level -8 / -16 and the other side gets one level fewer;
// q4_1/q5_1 spread [min, max] over the 16 / 32 levels. The K-quants are in quantize_k.cpp.
#include <cfloat>
#include <cmath>
#include <cstring>

#include "tensor/kernels.h"
#include "util/error.h"

namespace kvslim::detail {
namespace {

// The value of largest magnitude in x[0, n), with its sign (the first one on ties).
float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// Symmetric types: q = trunc(x / d + offset + 0.5) clamped to [0, 2 * offset - 1], where
// offset = 8 (4 bits) or 16 (5 bits). Truncation of a value >= 0 is round-half-up of x/d + offset.
template <int kBits>
void quantize_symmetric(const float* x, uint16_t& d_out, uint8_t* qs, uint32_t* qh) {
  constexpr int kOffset = 1 << (kBits - 1);
  const float max = signed_absmax(x, kQ4Block);
  const float d = max / -static_cast<float>(kOffset);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  d_out = fp32_to_fp16(d);
  uint32_t high = 0;
  for (int j = 0; j < 16; ++j) {
    int q0 = static_cast<int>(x[j] * id + (static_cast<float>(kOffset) + 0.5f));
    int q1 = static_cast<int>(x[j + 16] * id + (static_cast<float>(kOffset) + 0.5f));
    q0 = std::min(q0, 2 * kOffset - 1);
    q1 = std::min(q1, 2 * kOffset - 1);
    qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
    high |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
    high |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
  }
  if (qh != nullptr) *qh = high;
}

// Affine types: d = (max - min) / (levels - 1), m = min, q = round-half-up((x - min) / d).
template <int kBits>
void quantize_affine(const float* x, uint16_t& d_out, uint16_t& m_out, uint8_t* qs, uint32_t* qh) {
  constexpr int kMaxQ = (1 << kBits) - 1;
  float min = FLT_MAX, max = -FLT_MAX;
  for (int j = 0; j < kQ4Block; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
  const float d = (max - min) / static_cast<float>(kMaxQ);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  d_out = fp32_to_fp16(d);
  m_out = fp32_to_fp16(min);
  uint32_t high = 0;
  for (int j = 0; j < 16; ++j) {
    const int q0 = std::min(static_cast<int>((x[j] - min) * id + 0.5f), kMaxQ);
    const int q1 = std::min(static_cast<int>((x[j + 16] - min) * id + 0.5f), kMaxQ);
    qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
    high |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
    high |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
  }
  if (qh != nullptr) *qh = high;
}

}  // namespace

void quantize_row_blocks(DType type, const float* x, void* y, int64_t n) {
  const int64_t nb = n / dtype_block_size(type);
  switch (type) {
    case DType::Q4_0:
      for (int64_t b = 0; b < nb; ++b) {
        auto& blk = static_cast<BlockQ4_0*>(y)[b];
        quantize_symmetric<4>(x + b * kQ4Block, blk.d, blk.qs, nullptr);
      }
      return;
    case DType::Q5_0:
      for (int64_t b = 0; b < nb; ++b) {
        auto& blk = static_cast<BlockQ5_0*>(y)[b];
        uint32_t qh;
        quantize_symmetric<5>(x + b * kQ4Block, blk.d, blk.qs, &qh);
        std::memcpy(blk.qh, &qh, 4);
      }
      return;
    case DType::Q4_1:
      for (int64_t b = 0; b < nb; ++b) {
        auto& blk = static_cast<BlockQ4_1*>(y)[b];
        quantize_affine<4>(x + b * kQ4Block, blk.d, blk.m, blk.qs, nullptr);
      }
      return;
    case DType::Q5_1:
      for (int64_t b = 0; b < nb; ++b) {
        auto& blk = static_cast<BlockQ5_1*>(y)[b];
        uint32_t qh;
        quantize_affine<5>(x + b * kQ4Block, blk.d, blk.m, blk.qs, &qh);
        std::memcpy(blk.qh, &qh, 4);
      }
      return;
    case DType::Q2_K: quantize_row_q2_k(x, static_cast<BlockQ2_K*>(y), nb); return;
    case DType::Q3_K: quantize_row_q3_k(x, static_cast<BlockQ3_K*>(y), nb); return;
    case DType::Q4_K: quantize_row_q4_k(x, static_cast<BlockQ4_K*>(y), nb); return;
    case DType::Q5_K: quantize_row_q5_k(x, static_cast<BlockQ5_K*>(y), nb); return;
    case DType::Q6_K: quantize_row_q6_k(x, static_cast<BlockQ6_K*>(y), nb); return;
    case DType::IQ4_NL: quantize_row_iq4_nl(x, static_cast<BlockIQ4_NL*>(y), nb); return;
    case DType::IQ4_XS: quantize_row_iq4_xs(x, static_cast<BlockIQ4_XS*>(y), nb); return;
    case DType::MXFP4: quantize_row_mxfp4(x, static_cast<BlockMXFP4*>(y), nb); return;
    default: break;
  }
  fail("quantize_row_blocks: {} is not a block type", dtype_name(type));
}

}  // namespace kvslim::detail
