// matvec: y = W x for weights in their stored type (decode's hot path). Compiled once per
// instruction-set level (tensor/isa.h).
//
// Each row is one dot product computed the same way whatever thread runs it; the pool's threads
// take chunks of rows from a shared queue, so results are bit-identical for any number of
// threads. Rows are done one at a time: that keeps the weight reads a single sequential stream,
// which measured faster from DRAM than interleaving 2-8 rows that share the activation loads
// (and no slower from cache).
#include <algorithm>
#include <cstring>

#include "tensor/kernels.h"
#include "tensor/ops.h"
#include "tensor/quant_dot.h"
#include "tensor/tensor_isa.h"
#include "util/error.h"

#include "tensor/isa_begin.h"
#include "tensor/simd.h"

#if defined(KVSLIM_HAS_AVX512F) && defined(KVSLIM_HAS_AVX512BW) && defined(KVSLIM_HAS_AVX512VL)
#define KVSLIM_AVX512 1
#endif
#if defined(KVSLIM_AVX512) && defined(KVSLIM_HAS_AVX512VNNI)
#define KVSLIM_AVX512_VNNI 1
#endif

namespace kvslim::KVSLIM_ISA_NS {
namespace {

// ---------------------------------------------------------------------------------------------
// f32 / f16 / bf16 rows against an f32 x.

#if defined(KVSLIM_AVX512)

struct LoadF32 {
  static constexpr int kBytes = 4;
  static __m512 load(const uint8_t* row, int64_t i) { return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + i); }
  static __m512 load_tail(const uint8_t* row, int64_t i, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + i);
  }
};
struct LoadF16 {
  static constexpr int kBytes = 2;
  static __m512 load(const uint8_t* row, int64_t i) {
    return _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + i)));
  }
  static __m512 load_tail(const uint8_t* row, int64_t i, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + i));
  }
};
struct LoadBF16 {
  static constexpr int kBytes = 2;
  static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static __m512 load(const uint8_t* row, int64_t i) {
    return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + i)));
  }
  static __m512 load_tail(const uint8_t* row, int64_t i, __mmask16 m) {
    return widen(_mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + i));
  }
};

// One row's dot product. pf: how far ahead (bytes) of the current position to prefetch.
// Each pass covers 128 bytes of the row (two cache lines, two prefetches): 64 values of f16 /
// bf16 in four accumulators, 32 of f32 in two. For the 2-byte types, four accumulators over 64
// values measured 1.2x (f16) and 1.2-1.3x (bf16) the bytes per CPU-second of two over 32 on an
// 8192x2048 matvec, one thread, interleaved A/B runs; for f32 the wider pass measured slower,
// so f32 keeps the two-accumulator pass.
template <class L>
inline float dot_row_float(const uint8_t* row, const float* x, int64_t n, size_t pf) {
  constexpr int kStep = 128 / L::kBytes;
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    detail::prefetch_l2(row, pf + i * L::kBytes);
    detail::prefetch_l2(row, pf + i * L::kBytes + 64);
    acc0 = _mm512_fmadd_ps(L::load(row, i), _mm512_loadu_ps(x + i), acc0);
    acc1 = _mm512_fmadd_ps(L::load(row, i + 16), _mm512_loadu_ps(x + i + 16), acc1);
    if constexpr (kStep == 64) {
      acc2 = _mm512_fmadd_ps(L::load(row, i + 32), _mm512_loadu_ps(x + i + 32), acc2);
      acc3 = _mm512_fmadd_ps(L::load(row, i + 48), _mm512_loadu_ps(x + i + 48), acc3);
    }
  }
  for (; i + 16 <= n; i += 16) acc0 = _mm512_fmadd_ps(L::load(row, i), _mm512_loadu_ps(x + i), acc0);
  if (i < n) {
    const __mmask16 m = detail::first_lanes16(n - i);
    acc1 = _mm512_fmadd_ps(L::load_tail(row, i, m), _mm512_maskz_loadu_ps(m, x + i), acc1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

#elif defined(KVSLIM_HAS_AVX2) && defined(KVSLIM_HAS_FMA) && defined(KVSLIM_HAS_F16C)

struct LoadF32 {
  static constexpr int kBytes = 4;
  static __m256 load(const uint8_t* row, int64_t i) { return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i); }
  static float scalar(const uint8_t* row, int64_t i) { return reinterpret_cast<const float*>(row)[i]; }
};
struct LoadF16 {
  static constexpr int kBytes = 2;
  static __m256 load(const uint8_t* row, int64_t i) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(row) + i)));
  }
  static float scalar(const uint8_t* row, int64_t i) { return fp16_to_fp32(reinterpret_cast<const uint16_t*>(row)[i]); }
};
struct LoadBF16 {
  static constexpr int kBytes = 2;
  static __m256 load(const uint8_t* row, int64_t i) {
    const __m256i v = _mm256_cvtepu16_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(row) + i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
  static float scalar(const uint8_t* row, int64_t i) { return bf16_to_fp32(reinterpret_cast<const uint16_t*>(row)[i]); }
};

// As the AVX-512 version: each pass covers 128 bytes of the row (64 values of f16 / bf16 in four
// accumulators, 32 of f32), prefetched pf bytes ahead (matvec_range says why).
template <class L>
inline float dot_row_float(const uint8_t* row, const float* x, int64_t n, size_t pf) {
  constexpr int kStep = 128 / L::kBytes;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    detail::prefetch_l2(row, pf + i * L::kBytes);
    detail::prefetch_l2(row, pf + i * L::kBytes + 64);
#pragma GCC unroll 8
    for (int j = 0; j < kStep; j += 32) {
      acc0 = _mm256_fmadd_ps(L::load(row, i + j), _mm256_loadu_ps(x + i + j), acc0);
      acc1 = _mm256_fmadd_ps(L::load(row, i + j + 8), _mm256_loadu_ps(x + i + j + 8), acc1);
      acc2 = _mm256_fmadd_ps(L::load(row, i + j + 16), _mm256_loadu_ps(x + i + j + 16), acc2);
      acc3 = _mm256_fmadd_ps(L::load(row, i + j + 24), _mm256_loadu_ps(x + i + j + 24), acc3);
    }
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(L::load(row, i), _mm256_loadu_ps(x + i), acc0);
  float s = detail::hsum256(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
  for (; i < n; ++i) s += L::scalar(row, i) * x[i];
  return s;
}

#elif defined(KVSLIM_HAS_NEON)

struct LoadF32 {
  static constexpr int kBytes = 4;
  static float32x4_t load(const uint8_t* row, int64_t i) { return vld1q_f32(reinterpret_cast<const float*>(row) + i); }
  static float scalar(const uint8_t* row, int64_t i) { return reinterpret_cast<const float*>(row)[i]; }
};
struct LoadF16 {
  static constexpr int kBytes = 2;
  static float32x4_t load(const uint8_t* row, int64_t i) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(row) + i)));
  }
  static float scalar(const uint8_t* row, int64_t i) { return fp16_to_fp32(reinterpret_cast<const uint16_t*>(row)[i]); }
};
struct LoadBF16 {
  static constexpr int kBytes = 2;
  static float32x4_t load(const uint8_t* row, int64_t i) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(reinterpret_cast<const uint16_t*>(row) + i), 16));
  }
  static float scalar(const uint8_t* row, int64_t i) { return bf16_to_fp32(reinterpret_cast<const uint16_t*>(row)[i]); }
};

// Four accumulators of 4 lanes over 16 values per pass (the FMA latency of 4 cycles at 2 per
// cycle wants at least 8 in flight on big cores; 4 keep the loop short for the little ones).
template <class L>
inline float dot_row_float(const uint8_t* row, const float* x, int64_t n, size_t pf) {
  float32x4_t acc0 = vdupq_n_f32(0), acc1 = vdupq_n_f32(0), acc2 = vdupq_n_f32(0), acc3 = vdupq_n_f32(0);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __builtin_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(row) + pf + i * L::kBytes), 0, 3);
    acc0 = vfmaq_f32(acc0, L::load(row, i), vld1q_f32(x + i));
    acc1 = vfmaq_f32(acc1, L::load(row, i + 4), vld1q_f32(x + i + 4));
    acc2 = vfmaq_f32(acc2, L::load(row, i + 8), vld1q_f32(x + i + 8));
    acc3 = vfmaq_f32(acc3, L::load(row, i + 12), vld1q_f32(x + i + 12));
  }
  for (; i + 4 <= n; i += 4) acc0 = vfmaq_f32(acc0, L::load(row, i), vld1q_f32(x + i));
  float s = vaddvq_f32(vaddq_f32(vaddq_f32(acc0, acc1), vaddq_f32(acc2, acc3)));
  for (; i < n; ++i) s += L::scalar(row, i) * x[i];
  return s;
}

#else

struct LoadF32 {
  static float scalar(const uint8_t* row, int64_t i) { return reinterpret_cast<const float*>(row)[i]; }
};
struct LoadF16 {
  static float scalar(const uint8_t* row, int64_t i) { return fp16_to_fp32(reinterpret_cast<const uint16_t*>(row)[i]); }
};
struct LoadBF16 {
  static float scalar(const uint8_t* row, int64_t i) { return bf16_to_fp32(reinterpret_cast<const uint16_t*>(row)[i]); }
};

template <class L>
inline float dot_row_float(const uint8_t* row, const float* x, int64_t n, size_t /*pf*/) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += L::scalar(row, i + k) * x[i + k];
  }
  for (; i < n; ++i) acc[0] += L::scalar(row, i) * x[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

#endif

#if defined(KVSLIM_BF16_DOT)
// One BF16 row against x rounded to bf16 pairs: vdpbf16ps multiplies 32 weights with 32
// activations and adds the products pairwise into 16 f32 lanes, half the instructions of
// widening the weights to f32 and no conversion at all. Each pass covers 256 bytes of the row
// (128 values, four accumulators, four cache lines prefetched pf bytes ahead). Masked 16-bit
// loads cover a tail; when n is odd, x's padding zero meets a masked-out (zero) weight.
inline float dot_row_bf16_pairs(const uint8_t* row, const uint16_t* xb, int64_t n, size_t pf) {
  const auto* w = reinterpret_cast<const uint16_t*>(row);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
  auto dot32 = [&](__m512 acc, int64_t i) {
    return _mm512_dpbf16_ps(acc, (__m512bh)_mm512_loadu_si512(w + i), (__m512bh)_mm512_loadu_si512(xb + i));
  };
  int64_t i = 0;
  for (; i + 128 <= n; i += 128) {
    for (int line = 0; line < 4; ++line) detail::prefetch_l2(row, pf + i * 2 + 64 * line);
    acc0 = dot32(acc0, i);
    acc1 = dot32(acc1, i + 32);
    acc2 = dot32(acc2, i + 64);
    acc3 = dot32(acc3, i + 96);
  }
  for (; i + 32 <= n; i += 32) acc0 = dot32(acc0, i);
  if (i < n) {
    const __mmask32 m = static_cast<__mmask32>((uint64_t{1} << (n - i)) - 1);
    const __mmask32 mx = static_cast<__mmask32>((uint64_t{1} << ((n - i + 1) & ~int64_t{1})) - 1);
    acc1 = _mm512_dpbf16_ps(acc1, (__m512bh)_mm512_maskz_loadu_epi16(m, w + i),
                            (__m512bh)_mm512_maskz_loadu_epi16(mx, xb + i));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}
#endif

// ---------------------------------------------------------------------------------------------
// q8_0 rows against x quantised to 8 bits in blocks of 32.

#if defined(KVSLIM_AVX512_VNNI)

// Each row's q bytes are fed to VNNI as unsigned (w + 128, by flipping the top bit) against the
// signed activations; lane_corr (-128 * sum of the 4 activations of a lane) starts each lane's
// accumulator so the result is exactly sum(w * x) per block. Blocks go two per 512-bit
// register, whose two fp16 weight scales are broadcast into the halves of one vector (faster
// than gathering 16 scales at once) and multiplied by the matching activation scales.
inline float dot_row_q8(const uint8_t* row, const detail::Q8Activations& xa, int64_t nb, size_t pf) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m256 acc_tail = _mm256_setzero_ps();
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  int64_t b = 0;
  for (; b + 16 <= nb; b += 16) {
    const __m512 xs = _mm512_loadu_ps(xa.scale + b);
#pragma GCC unroll 8
    for (int p = 0; p < 8; ++p) {
      const int64_t blk = b + 2 * p;
      const __m512i xq = _mm512_loadu_si512(xa.q + blk * kQ8Block);
      const __m512i corr = _mm512_loadu_si512(xa.lane_corr + blk * 8);
      const __m512i pidx = _mm512_inserti64x4(_mm512_set1_epi32(2 * p), _mm256_set1_epi32(2 * p + 1), 1);
      const __m512 xsp = _mm512_permutexvar_ps(pidx, xs);
      const uint8_t* b0 = row + blk * sizeof(BlockQ8_0);
      const uint8_t* q0 = b0 + 2;
      detail::prefetch_l2(b0, pf);
      detail::prefetch_l2(b0, pf + 64);
      uint16_t ha, hb;
      std::memcpy(&ha, b0, 2);
      std::memcpy(&hb, b0 + sizeof(BlockQ8_0), 2);
      const __m256i hv = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(static_cast<short>(ha))),
                                                 _mm_set1_epi16(static_cast<short>(hb)), 1);
      const __m512 sc = _mm512_mul_ps(_mm512_cvtph_ps(hv), xsp);
      const __m512i w =
          _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q0))),
                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q0 + sizeof(BlockQ8_0))), 1);
      const __m512i d = _mm512_dpbusd_epi32(corr, _mm512_xor_si512(w, flip), xq);
      if (p & 1) {
        acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), sc, acc1);
      } else {
        acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), sc, acc0);
      }
    }
  }
  for (; b < nb; ++b) {
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa.q + b * kQ8Block));
    const __m256i corr = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa.lane_corr + b * 8));
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->q));
    const __m256i d = _mm256_dpbusd_epi32(corr, _mm256_xor_si256(w, _mm256_set1_epi8(static_cast<char>(0x80))), xq);
    const __m256 sc = _mm256_set1_ps(fp16_to_fp32(blk->scale_f16) * xa.scale[b]);
    acc_tail = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), sc, acc_tail);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_zextps256_ps512(acc_tail)));
}

#elif defined(KVSLIM_HAS_AVX2) && defined(KVSLIM_HAS_FMA) && defined(KVSLIM_HAS_F16C)

// AVX2 has no u8 x s8 dot with int32 sums of 4, and maddubs saturates at int16: the weights'
// signs move onto x (sign_epi8), so maddubs multiplies |w| <= 127 by x * sign(w), exact pairs of
// at most 2 * 127 * 127 (AVX-VNNI's vpdpbusd takes the same operands and sums into int32 in one
// instruction). Two blocks per step in two accumulators, prefetched pf bytes ahead.
inline float dot_row_q8(const uint8_t* row, const detail::Q8Activations& xa, int64_t nb, size_t pf) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  const auto* blocks = reinterpret_cast<const BlockQ8_0*>(row);
  auto block_dot = [&](int64_t b) {
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa.q + b * kQ8Block));
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocks[b].q));
#if defined(KVSLIM_HAS_AVXVNNI)
    return _mm256_cvtepi32_ps(
        detail::dpbusd256(_mm256_setzero_si256(), _mm256_sign_epi8(w, w), _mm256_sign_epi8(xq, w)));
#else
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(xq, w));
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
#endif
  };
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    detail::prefetch_l2(blocks + b, pf);
    acc0 = _mm256_fmadd_ps(block_dot(b), _mm256_set1_ps(fp16_to_fp32(blocks[b].scale_f16) * xa.scale[b]), acc0);
    acc1 = _mm256_fmadd_ps(block_dot(b + 1), _mm256_set1_ps(fp16_to_fp32(blocks[b + 1].scale_f16) * xa.scale[b + 1]),
                           acc1);
  }
  if (b < nb)
    acc0 = _mm256_fmadd_ps(block_dot(b), _mm256_set1_ps(fp16_to_fp32(blocks[b].scale_f16) * xa.scale[b]), acc0);
  return detail::hsum256(_mm256_add_ps(acc0, acc1));
}

#elif defined(KVSLIM_HAS_NEON)

// Sum of the products of 32 int8 weights and 32 int8 activations, as 4 int32 lanes (exact).
inline int32x4_t dot32_s8(int8x16_t w0, int8x16_t w1, int8x16_t x0, int8x16_t x1) {
  return detail::neon_dot_s8(detail::neon_dot_s8(vdupq_n_s32(0), w0, x0), w1, x1);
}

// Per block: the exact int32 dot product (sdot under dotprod, widening multiplies otherwise),
// converted to f32 and multiplied by d_w * d_x into one of two f32 accumulators.
inline float dot_row_q8(const uint8_t* row, const detail::Q8Activations& xa, int64_t nb, size_t pf) {
  const auto* blocks = reinterpret_cast<const BlockQ8_0*>(row);
  float32x4_t acc0 = vdupq_n_f32(0), acc1 = vdupq_n_f32(0);
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    __builtin_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(blocks + b) + pf), 0, 3);
    const BlockQ8_0& k0 = blocks[b];
    const BlockQ8_0& k1 = blocks[b + 1];
    const int8_t* x0 = xa.q + b * kQ8Block;
    const int32x4_t d0 = dot32_s8(vld1q_s8(k0.q), vld1q_s8(k0.q + 16), vld1q_s8(x0), vld1q_s8(x0 + 16));
    const int32x4_t d1 = dot32_s8(vld1q_s8(k1.q), vld1q_s8(k1.q + 16), vld1q_s8(x0 + 32), vld1q_s8(x0 + 48));
    acc0 = vfmaq_n_f32(acc0, vcvtq_f32_s32(d0), fp16_to_fp32(k0.scale_f16) * xa.scale[b]);
    acc1 = vfmaq_n_f32(acc1, vcvtq_f32_s32(d1), fp16_to_fp32(k1.scale_f16) * xa.scale[b + 1]);
  }
  if (b < nb) {
    const BlockQ8_0& k0 = blocks[b];
    const int8_t* x0 = xa.q + b * kQ8Block;
    const int32x4_t d0 = dot32_s8(vld1q_s8(k0.q), vld1q_s8(k0.q + 16), vld1q_s8(x0), vld1q_s8(x0 + 16));
    acc0 = vfmaq_n_f32(acc0, vcvtq_f32_s32(d0), fp16_to_fp32(k0.scale_f16) * xa.scale[b]);
  }
  return vaddvq_f32(vaddq_f32(acc0, acc1));
}

#else

inline float dot_row_q8(const uint8_t* row, const detail::Q8Activations& xa, int64_t nb, size_t /*pf*/) {
  const auto* blocks = reinterpret_cast<const BlockQ8_0*>(row);
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t s = 0;
    for (int j = 0; j < kQ8Block; ++j) s += static_cast<int32_t>(blocks[b].q[j]) * xa.q[b * kQ8Block + j];
    acc += static_cast<float>(s) * (fp16_to_fp32(blocks[b].scale_f16) * xa.scale[b]);
  }
  return acc;
}

#endif

// ---------------------------------------------------------------------------------------------

// What matvec_range gets for the block types.
struct QuantPrep {
  detail::QuantActivations xa;
  QuantKernel path;
};

void matvec_range(const WeightView& w, const void* xprep, int64_t r0, int64_t r1, float* y) {
  const int64_t n = w.cols;
  // Software prefetch ahead of the read position: rows are only a page or so long, too short for
  // the hardware prefetchers to ramp up on each row by themselves. The float types prefetch
  // 4 KiB ahead: into L2 (prefetch_l2) f16 decoded 11.5 tok/s at 4 KiB against 11.0 at 2 KiB and
  // 11.4 at 8 KiB (1B shape, 2 threads, the 2026-11-27 VM), and a whole row ahead (16 KiB for
  // ffn_down) was level or 3% slower (into L1 it was far slower). The block types: see
  // block_prefetch_bytes.
  const size_t pf = dtype_is_quantized(w.type) ? detail::block_prefetch_bytes(w.type, w.cols) : 4096;
  if (r1 > r0 && (!dtype_is_quantized(w.type) || w.type == DType::Q8_0)) {
    // The loops prefetch pf bytes ahead of where they read: the first pf bytes of a range (the
    // start of a chunk, far from where this thread read last) are asked for here, all at once,
    // rather than met one cache miss at a time.
    const size_t bytes = std::min(pf, static_cast<size_t>(r1 - r0) * row_bytes(w.type, w.cols));
    for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(w.row(r0) + off, 0, 3);
  }
  switch (w.type) {
    case DType::F32:
      for (int64_t r = r0; r < r1; ++r)
        y[r] = dot_row_float<LoadF32>(w.row(r), static_cast<const float*>(xprep), n, pf);
      return;
    case DType::F16:
      for (int64_t r = r0; r < r1; ++r)
        y[r] = dot_row_float<LoadF16>(w.row(r), static_cast<const float*>(xprep), n, pf);
      return;
    case DType::BF16:
#if defined(KVSLIM_BF16_DOT)
      for (int64_t r = r0; r < r1; ++r) y[r] = dot_row_bf16_pairs(w.row(r), static_cast<const uint16_t*>(xprep), n, pf);
#else
      for (int64_t r = r0; r < r1; ++r)
        y[r] = dot_row_float<LoadBF16>(w.row(r), static_cast<const float*>(xprep), n, pf);
#endif
      return;
    case DType::Q8_0: {
      const auto& xa = *static_cast<const detail::Q8Activations*>(xprep);
      const int64_t nb = n / kQ8Block;
      for (int64_t r = r0; r < r1; ++r) y[r] = dot_row_q8(w.row(r), xa, nb, pf);
      return;
    }
    default: {
      // Block types: integer dot products on quantised activations (quant_dot_*.cpp).
      const auto& qp = *static_cast<const QuantPrep*>(xprep);
      detail::quant_dot_rows(w, qp.xa, r0, r1, y + r0, qp.path);
      return;
    }
  }
}

#if defined(KVSLIM_BF16_DOT)
// x rounded to bf16 (nearest even) into dst, n values plus a zero when n is odd, so that the
// pairs dot_row_bf16_pairs reads are whole.
void round_x_to_bf16_pairs(const float* x, int64_t n, uint16_t* dst) {
  KVSLIM_ISA_NS::convert_from_f32(x, DType::BF16, dst, n);
  if (n % 2 != 0) dst[n] = 0;
}
#endif

}  // namespace

bool bf16_weights_round_x() {
#if defined(KVSLIM_BF16_DOT)
  return true;
#else
  return false;
#endif
}

void matvec_multi(std::span<const WeightView> ws, const float* x, std::span<float* const> ys, ThreadPool& pool,
                  QuantKernel path) {
  if (ws.size() != ys.size()) fail("matvec_multi: {} matrices but {} outputs", ws.size(), ys.size());
  if (ws.empty()) return;
  const WeightView& w0 = ws[0];
  for (const WeightView& w : ws) {
    if (w.rows < 0 || w.cols < 0) fail("matvec: invalid weight shape {}x{}", w.rows, w.cols);
  }
  // One dispatch needs one prepared x: the same type and width throughout. Anything else is
  // done one matrix at a time.
  bool same = true;
  for (const WeightView& w : ws) same = same && w.type == w0.type && w.cols == w0.cols;
  if (!same) {
    for (size_t i = 0; i < ws.size(); ++i) KVSLIM_ISA_NS::matvec_multi({&ws[i], 1}, x, {&ys[i], 1}, pool, path);
    return;
  }
  if (w0.cols == 0) {
    for (size_t i = 0; i < ws.size(); ++i) std::memset(ys[i], 0, static_cast<size_t>(ws[i].rows) * sizeof(float));
    return;
  }
  if (w0.cols % dtype_block_size(w0.type) != 0)
    fail("matvec: {} weight has {} columns, not a multiple of {}", dtype_name(w0.type), w0.cols,
         dtype_block_size(w0.type));
  const void* xprep = x;
  detail::Q8Activations xa;
  if (w0.type == DType::Q8_0) {
    thread_local detail::Scratch scratch;
    xa = detail::quantize_activations(x, w0.cols, scratch.get(detail::q8_activation_bytes(w0.cols)));
    xprep = &xa;
  }
#if defined(KVSLIM_BF16_DOT)
  if (w0.type == DType::BF16) {
    thread_local detail::Scratch scratch;
    auto* xb = static_cast<uint16_t*>(scratch.get(static_cast<size_t>(w0.cols + 1) * sizeof(uint16_t)));
    round_x_to_bf16_pairs(x, w0.cols, xb);
    xprep = xb;
  }
#endif
  QuantPrep qp;
  if (dtype_is_quantized(w0.type) && w0.type != DType::Q8_0) {
    thread_local detail::Scratch scratch;
    qp.xa = detail::prepare_quant_activations(w0.type, x, w0.cols,
                                              scratch.get(detail::quant_activation_bytes(w0.type, w0.cols)));
    qp.path = detail::resolve_quant_kernel(path);
    xprep = &qp;
  }
  const size_t rb = row_bytes(w0.type, w0.cols);
  int64_t total_rows = 0;
  for (const WeightView& w : ws) total_rows += w.rows;
  // Small work is not worth a dispatch.
  if (pool.size() == 1 || static_cast<size_t>(total_rows) * rb < (size_t{128} << 10) || total_rows < 2) {
    for (size_t i = 0; i < ws.size(); ++i) matvec_range(ws[i], xprep, 0, ws[i].rows, ys[i]);
    return;
  }
  // The rows of all the matrices, end to end, go out in shrinking chunks (GuidedQueue: a quarter
  // of what is left with 2 threads, at least 64 KiB of weights); a chunk that crosses from one
  // matrix into the next is done as two ranges. Fixed chunks of 1/8 of the rows per thread left
  // one thread waiting for the other for half a chunk on average at the end of every dispatch.
  const int64_t min_rows = static_cast<int64_t>(((size_t{64} << 10) + rb - 1) / rb);
  detail::GuidedQueue queue(total_rows, min_rows, 2 * pool.size());
  pool.run_fn([&](int, int) {
    int64_t c0, c1;
    while (queue.pop(c0, c1)) {
      int64_t first = 0;  // the first row of matrix i in the concatenation
      for (size_t i = 0; i < ws.size() && c0 < c1; first += ws[i].rows, ++i) {
        const int64_t end = first + ws[i].rows;
        if (c0 >= end) continue;
        const int64_t stop = std::min(c1, end);
        matvec_range(ws[i], xprep, c0 - first, stop - first, ys[i]);
        c0 = stop;
      }
    }
  });
}

#if defined(KVSLIM_HAS_NEON)
// q8_0 rows and every block type's dot products on aarch64 (neon_dot_s8: sdot or widening
// multiplies).
#if defined(KVSLIM_HAS_NEON_DOTPROD)
constexpr const char* kNeonInt8Dot = "neon-dotprod int8 dot (sdot)";
#else
constexpr const char* kNeonInt8Dot = "neon int8 dot (widening multiplies)";
#endif
#endif

const char* matvec_kernel(DType type) {
  switch (type) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
#if defined(KVSLIM_BF16_DOT)
      if (type == DType::BF16) return "avx512-bf16 dot (x rounded to bf16)";
#endif
#if defined(KVSLIM_AVX512)
      return "avx512 f32 fma";
#elif defined(KVSLIM_HAS_AVX2)
      return "avx2 f32 fma";
#elif defined(KVSLIM_HAS_NEON)
      return "neon f32 fma";
#else
      return "scalar f32";
#endif
    case DType::Q8_0:
#if defined(KVSLIM_AVX512_VNNI)
      return "avx512-vnni int8 dot";
#elif defined(KVSLIM_HAS_AVXVNNI)
      return "avx-vnni int8 dot";
#elif defined(KVSLIM_HAS_AVX2)
      return "avx2 int8 dot";
#elif defined(KVSLIM_HAS_NEON)
      return kNeonInt8Dot;
#else
      return "scalar int8 dot";
#endif
    default:
      switch (detail::resolve_quant_kernel(QuantKernel::Auto)) {
#if defined(KVSLIM_HAS_AVXVNNI)
        case QuantKernel::Vnni: return "avx-vnni int8 dot";
#else
        case QuantKernel::Vnni: return "avx512-vnni int8 dot";
#endif
        case QuantKernel::Avx2: return "avx2 int8 dot";
#if defined(KVSLIM_HAS_NEON)
        case QuantKernel::Neon: return kNeonInt8Dot;
#endif
        default: return "scalar int8 dot";
      }
  }
}

}  // namespace kvslim::KVSLIM_ISA_NS
