// Portable scalar path of the block types' integer dot products (the reference the SIMD paths
// are tested against, and the path on CPUs without AVX2). Same integer math as the SIMD paths:
// exact int32 sums of level * activation per (sub-)block, offsets and mins applied through the
// activation sums.
#include <cstring>

#include "tensor/quant_dot.h"
#include "tensor/tensor_isa.h"
#include "util/error.h"

#include "tensor/isa_begin.h"
#include "tensor/simd.h"

namespace kvslim::KVSLIM_ISA_NS::detail {
namespace {

// Legacy blocks: levels q (0..15 or 0..31) of value i of a 32-value block.
inline int nibble(const uint8_t* qs, int i) { return i < 16 ? (qs[i] & 0xF) : (qs[i - 16] >> 4); }
inline int fifth_bit(const uint8_t* qh, int i) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  return static_cast<int>((h >> i) & 1u) << 4;
}

// sum_i level(i) * xq[i] over one 32-value block.
template <class LevelFn>
inline int32_t block_dot(const int8_t* xq, LevelFn&& level) {
  int32_t s = 0;
  for (int i = 0; i < 32; ++i) s += level(i) * xq[i];
  return s;
}

float dot_legacy(DType type, const uint8_t* row, const QuantActivations& xa) {
  const int64_t nb = xa.n / kQ4Block;
  float acc = 0;
  for (int64_t b = 0; b < nb; ++b) {
    const int8_t* xq = xa.q + b * kQ4Block;
    const float dx = xa.d[b];
    switch (type) {
      case DType::Q4_0: {
        const auto& blk = reinterpret_cast<const BlockQ4_0*>(row)[b];
        const int32_t s = block_dot(xq, [&](int i) { return nibble(blk.qs, i); });
        acc += fp16_to_fp32(blk.d) * dx * static_cast<float>(s - 8 * xa.sum[b]);
        break;
      }
      case DType::Q4_1: {
        const auto& blk = reinterpret_cast<const BlockQ4_1*>(row)[b];
        const int32_t s = block_dot(xq, [&](int i) { return nibble(blk.qs, i); });
        acc +=
            fp16_to_fp32(blk.d) * dx * static_cast<float>(s) + fp16_to_fp32(blk.m) * dx * static_cast<float>(xa.sum[b]);
        break;
      }
      case DType::Q5_0: {
        const auto& blk = reinterpret_cast<const BlockQ5_0*>(row)[b];
        const int32_t s = block_dot(xq, [&](int i) { return nibble(blk.qs, i) | fifth_bit(blk.qh, i); });
        acc += fp16_to_fp32(blk.d) * dx * static_cast<float>(s - 16 * xa.sum[b]);
        break;
      }
      case DType::Q5_1: {
        const auto& blk = reinterpret_cast<const BlockQ5_1*>(row)[b];
        const int32_t s = block_dot(xq, [&](int i) { return nibble(blk.qs, i) | fifth_bit(blk.qh, i); });
        acc +=
            fp16_to_fp32(blk.d) * dx * static_cast<float>(s) + fp16_to_fp32(blk.m) * dx * static_cast<float>(xa.sum[b]);
        break;
      }
      case DType::IQ4_NL: {  // signed levels from the table: no offset to correct
        const auto& blk = reinterpret_cast<const BlockIQ4_NL*>(row)[b];
        const int32_t s = block_dot(xq, [&](int i) { return int{kIQ4Levels[nibble(blk.qs, i)]}; });
        acc += fp16_to_fp32(blk.d) * dx * static_cast<float>(s);
        break;
      }
      case DType::MXFP4: {  // likewise, with the e2m1 table and the halved power-of-two scale
        const auto& blk = reinterpret_cast<const BlockMXFP4*>(row)[b];
        const int32_t s = block_dot(xq, [&](int i) { return int{kMXFP4Levels[nibble(blk.qs, i)]}; });
        acc += e8m0_to_fp32_half(blk.e) * dx * static_cast<float>(s);
        break;
      }
      default: fail("dot_legacy: {} is not a 32-value block type", dtype_name(type));
    }
  }
  return acc;
}

// Level of value i (0..255) of a K-quant super-block, unsigned.
inline int level_2bit(const uint8_t* qs, int i) { return (qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3; }

float dot_k(DType type, const uint8_t* row, const QuantActivations& xa) {
  const int64_t nb = xa.n / kQK;
  float acc = 0;
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8_K& x = xa.k[b];
    // Per 16-value sub-block: sum(level * x).
    int32_t sub[16] = {};
    switch (type) {
      case DType::Q2_K: {
        const auto& blk = reinterpret_cast<const BlockQ2_K*>(row)[b];
        for (int i = 0; i < kQK; ++i) sub[i / 16] += level_2bit(blk.qs, i) * x.qs[i];
        int32_t isum = 0, msum = 0;
        for (int j = 0; j < 16; ++j) {
          isum += (blk.scales[j] & 0xF) * sub[j];
          msum += (blk.scales[j] >> 4) * x.bsums[j];
        }
        acc +=
            x.d * (fp16_to_fp32(blk.d) * static_cast<float>(isum) - fp16_to_fp32(blk.dmin) * static_cast<float>(msum));
        break;
      }
      case DType::Q3_K: {
        const auto& blk = reinterpret_cast<const BlockQ3_K*>(row)[b];
        for (int i = 0; i < kQK; ++i) {
          const int q = level_2bit(blk.qs, i) | (((blk.hmask[i % 32] >> (i / 32)) & 1) << 2);
          sub[i / 16] += q * x.qs[i];
        }
        int32_t isum = 0;
        for (int j = 0; j < 16; ++j) isum += (q3k_scale(blk.scales, j) - 32) * (sub[j] - 4 * x.bsums[j]);
        acc += x.d * fp16_to_fp32(blk.d) * static_cast<float>(isum);
        break;
      }
      case DType::Q4_K:
      case DType::Q5_K: {
        const bool five = type == DType::Q5_K;
        const auto* b4 = reinterpret_cast<const BlockQ4_K*>(row) + b;
        const auto* b5 = reinterpret_cast<const BlockQ5_K*>(row) + b;
        const uint8_t* scales = five ? b5->scales : b4->scales;
        const uint8_t* qs = five ? b5->qs : b4->qs;
        for (int i = 0; i < kQK; ++i) {
          const int j = i / 32, l = i % 32;
          int q = (j & 1) ? (qs[32 * (j / 2) + l] >> 4) : (qs[32 * (j / 2) + l] & 0xF);
          if (five) q |= ((b5->qh[l] >> j) & 1) << 4;
          sub[i / 16] += q * x.qs[i];
        }
        int32_t isum = 0, msum = 0;
        for (int j = 0; j < 8; ++j) {
          int sc, m;
          k4_scale_min(scales, j, sc, m);
          isum += sc * (sub[2 * j] + sub[2 * j + 1]);
          msum += m * (x.bsums[2 * j] + x.bsums[2 * j + 1]);
        }
        const float d = fp16_to_fp32(five ? b5->d : b4->d), dmin = fp16_to_fp32(five ? b5->dmin : b4->dmin);
        acc += x.d * (d * static_cast<float>(isum) - dmin * static_cast<float>(msum));
        break;
      }
      case DType::Q6_K: {
        const auto& blk = reinterpret_cast<const BlockQ6_K*>(row)[b];
        for (int i = 0; i < kQK; ++i) {
          const int h = i / 128, r = i % 128, l = r % 32, k = r / 32;
          const uint8_t lb = blk.ql[64 * h + l + 32 * (k & 1)];
          const int q = (k < 2 ? (lb & 0xF) : (lb >> 4)) | (((blk.qh[32 * h + l] >> (2 * k)) & 3) << 4);
          sub[i / 16] += q * x.qs[i];
        }
        int32_t isum = 0;
        for (int j = 0; j < 16; ++j) isum += blk.scales[j] * (sub[j] - 32 * x.bsums[j]);
        acc += x.d * fp16_to_fp32(blk.d) * static_cast<float>(isum);
        break;
      }
      case DType::IQ4_XS: {
        const auto& blk = reinterpret_cast<const BlockIQ4_XS*>(row)[b];
        for (int i = 0; i < kQK; ++i) sub[i / 16] += kIQ4Levels[nibble(blk.qs + 16 * (i / 32), i % 32)] * x.qs[i];
        int32_t isum = 0;
        for (int j = 0; j < 8; ++j) isum += iq4xs_scale(blk, j) * (sub[2 * j] + sub[2 * j + 1]);
        acc += x.d * fp16_to_fp32(blk.d) * static_cast<float>(isum);
        break;
      }
      default: fail("dot_k: {} is not a 256-value block type", dtype_name(type));
    }
  }
  return acc;
}

}  // namespace

float quant_dot_row_scalar(DType type, const uint8_t* row, const QuantActivations& xa) {
  return dtype_block_size(type) == kQK ? dot_k(type, row, xa) : dot_legacy(type, row, xa);
}

}  // namespace kvslim::KVSLIM_ISA_NS::detail
