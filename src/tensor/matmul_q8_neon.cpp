// Int8 GEMM on aarch64 (the neon, dotprod and i8mm levels): the same weight types, the same int8
// values (unpack_int8_block, quantize_x_block in matmul_q8.cpp) and the same f32 steps as the
// x86 int8 GEMMs, so its results have the bits of the AVX2 / AVX-512 VNNI / AMX kernels'.
//
// NEON multiplies signed by signed bytes, so unlike VNNI's u8 x s8 there is no +128 bias to take
// back: a block's int32 sum is sum(q_w * q_x) straight from the products (exact: 32 products of
// at most 128 * 127). It is then scaled as on x86: acc = fma(float(sum), d_w * d_x, acc), plus
// min * (d_x * sum(q_x)) for the types with mins (q4_1, q5_1, q4_K, q5_K), summed in f32 per K
// slice of kInt8SliceBlocks blocks, the slices added in order into y.
//
// Two micro-kernels (the first in two forms), on one packing scheme with a group size G of 4 or 8 bytes: a block of 32
// values is 32 / G steps; X is quantised once per call and packed in panels of kMR tokens as
// [step][token][G bytes] per block, then the kMR scales and sums; per K slice a thread repacks a
// panel of kNR weight rows as [step][row][G bytes] per block, then the kNR scales and mins.
//   - dotprod, G = 4: sdot by lane (vdotq_laneq_s32) multiplies 4 rows' 4 bytes (one vector)
//     with one token's 4 bytes (a lane of the vector holding 4 tokens' 4 bytes) into 4 int32
//     lanes, one per row. Tile: 4 tokens x 12 rows, 12 int32 and 12 f32 accumulators.
//     Plain NEON (ARMv8.0: Cortex-A53/A72, Raspberry Pi 3/4) has no sdot: the same kernel
//     forms each lane's 4 products with widening multiplies and sums them with pairwise adds
//     (sdot_lane below), the same exact int32 sums in about seven instructions instead of one.
//   - i8mm, G = 8: smmla (vmmlaq_s32) multiplies a 2 x 8 matrix of two tokens' 8 bytes with a
//     2 x 8 matrix of two rows' 8 bytes into a 2 x 2 int32 tile [t0 r0, t0 r1, t1 r0, t1 r1]:
//     twice sdot's products per instruction. Tile: 4 tokens x 8 rows, 8 int32 and 8 f32
//     accumulators of 2 x 2; the scales are laid out the same way, and the f32 tiles are
//     unzipped into rows of y only at the end.
#include <algorithm>
#include <cstring>

#include "tensor/kernels.h"
#include "tensor/matmul_internal.h"
#include "tensor/tensor_isa.h"
#include "util/error.h"

#include "tensor/isa_begin.h"
#include "tensor/simd.h"
#include "tensor/int8_gemm_driver.h"

#if defined(KVSLIM_HAS_NEON)
#define KVSLIM_Q8_GEMM_NEON 1
#endif

namespace kvslim::KVSLIM_ISA_NS::detail {

#if defined(KVSLIM_Q8_GEMM_NEON)

namespace {

constexpr int64_t kKB = kInt8SliceBlocks;  // blocks per K slice

// A micro-tile of MR tokens x NR weight rows, packed in groups of G bytes (4: sdot, 8: smmla).
// SubScales: q2_K, q3_K and q6_K, whose two 16-value halves of a block have int8 scales (q2_K:
// and mins) of their own: the block's int32 sum is sum_h sub_h * (half h's sum), exact, then
// scaled by d like any block's; q2_K's min term sum_h m_h * (half h's sum of x_q), exact, is
// scaled by -dmin * d_x (the x86 kernels' integers and f32 steps, so the same bits).
template <int MR, int NR, int G, bool SubScales = false>
struct Tile {
  static constexpr int kMR = MR;
  static constexpr int kNR = NR;
  static constexpr int kG = G;
  static constexpr int kSteps = kQ8Block / G;
  static constexpr bool kSubScales = SubScales;
  static constexpr int kParts = SubScales ? 2 : 1;  // runs of steps summed apart: the halves
  static constexpr int kPartSteps = kSteps / kParts;
  static_assert(NR % 4 == 0 && (G == 4 || G == 8) && (G == 4 ? MR == 4 : MR % 2 == 0 && NR % 4 == 0));
  // One packed X block: q [kSteps][kMR][G], then scales [kMR] f32 and sums of q [kMR] i32, and
  // (SubScales) the halves' sums of q [2][kMR] i32.
  static constexpr size_t kXLevels = static_cast<size_t>(kQ8Block) * kMR;
  static constexpr size_t kXBlockBytes = kXLevels + (SubScales ? 4 : 2) * kMR * 4;
  // One packed W block: q [kSteps][kNR][G], then scales [kNR] and mins [kNR] f32, or (SubScales)
  // scales [kNR] f32, the halves' scales [2][kNR] and mins [2][kNR] i32 and -dmin [kNR] f32.
  static constexpr size_t kWLevels = static_cast<size_t>(kQ8Block) * kNR;
  static constexpr size_t kWBlockBytes = kWLevels + (SubScales ? 6 : 2) * kNR * 4;
};

template <class T>
void pack_x_panel(const float* x, int64_t n, int64_t k, int64_t t0, uint8_t* dst) {
  constexpr int kMR = T::kMR, G = T::kG;
  const int64_t nb = k / kQ8Block;
  const int mt = static_cast<int>(std::min<int64_t>(kMR, n - t0));
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* blk = dst + b * T::kXBlockBytes;
    auto* scales = reinterpret_cast<float*>(blk + T::kXLevels);
    auto* sums = reinterpret_cast<int32_t*>(scales + kMR);
    for (int t = 0; t < kMR; ++t) {
      alignas(16) int8_t q[kQ8Block];
      float d = 0.0f;
      int32_t sum = 0;
      if (t < mt) {
        quantize_x_block(x + (t0 + t) * k + b * kQ8Block, q, d, sum);
      } else {
        std::memset(q, 0, sizeof(q));
      }
      scales[t] = d;
      sums[t] = sum;
      if constexpr (T::kSubScales) {
        for (int h = 0; h < 2; ++h) {
          int32_t half = 0;
          for (int i = 16 * h; i < 16 * h + 16; ++i) half += q[i];
          sums[(1 + h) * kMR + t] = half;
        }
      }
      for (int s = 0; s < T::kSteps; ++s) std::memcpy(blk + (s * kMR + t) * G, q + G * s, G);
    }
  }
}

// Packs rows [r0, r0 + kNR) x blocks [b0, b0 + nbk) of w; rows past the end get q = 0 and
// scale = min = 0.
template <class T>
void pack_w_panel(const WeightView& w, int64_t r0, int64_t b0, int64_t nbk, uint8_t* dst) {
  constexpr int kNR = T::kNR, G = T::kG;
  const int nr = static_cast<int>(std::min<int64_t>(kNR, w.rows - r0));
  for (int64_t b = 0; b < nbk; ++b) {
    uint8_t* blk = dst + b * T::kWBlockBytes;
    auto* scales = reinterpret_cast<float*>(blk + T::kWLevels);
    auto* mins = scales + kNR;                      // (SubScales: no mins)
    auto* subs = reinterpret_cast<int32_t*>(mins);  // (SubScales) [half][row]
    // Past the block (past the buffer for its last block) without sub-scales: not formed then.
    int32_t* half_mins = T::kSubScales ? subs + 2 * kNR : nullptr;                           // [half][row]
    float* min_scales = T::kSubScales ? reinterpret_cast<float*>(subs + 4 * kNR) : nullptr;  // [row]: -dmin
    for (int j = 0; j < kNR; ++j) {
      alignas(16) int8_t q[kQ8Block];
      if (j < nr && T::kSubScales) {
        Int8Halves hs;
        unpack_int8_halves(w.type, w.row(r0 + j), b0 + b, q, hs);
        scales[j] = hs.d;
        min_scales[j] = -hs.dmin;
        for (int h = 0; h < 2; ++h) {
          subs[h * kNR + j] = hs.sub[h];
          half_mins[h * kNR + j] = hs.min[h];
        }
      } else if (j < nr) {
        unpack_int8_block(w.type, w.row(r0 + j), b0 + b, q, scales[j], mins[j]);
      } else {
        std::memset(q, 0, sizeof(q));
        scales[j] = 0.0f;
        mins[j] = 0.0f;
        if constexpr (T::kSubScales) {
          subs[kNR + j] = half_mins[j] = half_mins[kNR + j] = 0;
          min_scales[j] = 0.0f;
        }
      }
      for (int s = 0; s < T::kSteps; ++s) std::memcpy(blk + (s * kNR + j) * G, q + G * s, G);
    }
  }
}

// Writes (first K slice) or adds (later ones) the tile's rows of y: out[t][v] holds token t's
// rows 4v .. 4v + 3.
template <int kMR, int kNRV>
inline void store_tile(const float32x4_t (&out)[kMR][kNRV], float* c, int64_t ldc, int mt, int nr, bool first) {
  constexpr int kNR = 4 * kNRV;
  if (nr == kNR) {
#pragma GCC unroll 8
    for (int t = 0; t < kMR; ++t) {
      if (t >= mt) break;
      float* ct = c + t * ldc;
#pragma GCC unroll 4
      for (int v = 0; v < kNRV; ++v) {
        float32x4_t o = out[t][v];
        if (!first) o = vaddq_f32(o, vld1q_f32(ct + 4 * v));
        vst1q_f32(ct + 4 * v, o);
      }
    }
    return;
  }
  float tile[kMR][kNR];
#pragma GCC unroll 8
  for (int t = 0; t < kMR; ++t) {
#pragma GCC unroll 4
    for (int v = 0; v < kNRV; ++v) vst1q_f32(tile[t] + 4 * v, out[t][v]);
  }
  for (int t = 0; t < mt; ++t) {
    float* ct = c + t * ldc;
    for (int j = 0; j < nr; ++j) ct[j] = first ? tile[t][j] : ct[j] + tile[t][j];
  }
}

// acc + sdot of w (4 rows x 4 bytes) with x's 4 bytes of lane kLane: lane r gains
// sum_i w[4r + i] * x[4 kLane + i].
template <int kLane>
inline int32x4_t sdot_lane(int32x4_t acc, int8x16_t w, int8x16_t x) {
#if defined(KVSLIM_HAS_NEON_DOTPROD)
  return vdotq_laneq_s32(acc, w, x, kLane);
#else
  // The token's 4 bytes in every lane, 16 products as int16 (|128 * 127| fits), then pairs
  // and pairs of pairs added into int32: lane r of the result is row r's 4-product sum.
  const int8x16_t xb = vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(x), kLane));
  const int16x8_t lo = vmull_s8(vget_low_s8(w), vget_low_s8(xb));
  const int16x8_t hi = vmull_high_s8(w, xb);
  return vaddq_s32(acc, vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi)));
#endif
}

// The dotprod kernel (G = 4, 4 tokens): per step of 4 values, the tile's kNR / 4 weight vectors
// (4 rows x 4 bytes each) times each token's 4 bytes, a lane of one vector.
template <class T, bool kMins>
void micro_kernel_sdot(const uint8_t* xp, const uint8_t* wp, int64_t nbk, float* c, int64_t ldc, int mt, int nr,
                       bool first) {
  constexpr int kMR = T::kMR, kNR = T::kNR, kNRV = kNR / 4;
  static_assert(T::kG == 4 && kMR == 4);
  // The output rows lie w.rows floats apart, out of cache: ask for them now.
  for (int t = 0; t < mt; ++t) {
    __builtin_prefetch(c + t * ldc, 1, 3);
    __builtin_prefetch(c + t * ldc + kNR - 1, 1, 3);
  }
  float32x4_t facc[kMR][kNRV];
#pragma GCC unroll 4
  for (int t = 0; t < kMR; ++t) {
#pragma GCC unroll 4
    for (int v = 0; v < kNRV; ++v) facc[t][v] = vdupq_n_f32(0);
  }
  for (int64_t b = 0; b < nbk; ++b) {
    const uint8_t* xb = xp + b * T::kXBlockBytes;
    const uint8_t* wb = wp + b * T::kWBlockBytes;
    const auto* xs = reinterpret_cast<const float*>(xb + T::kXLevels);
    const auto* xsum = reinterpret_cast<const int32_t*>(xs + kMR);
    const auto* ws = reinterpret_cast<const float*>(wb + T::kWLevels);
    const auto* subs = reinterpret_cast<const int32_t*>(ws + kNR);
    int32x4_t isum[kMR][kNRV];  // the block's int32 sums
#pragma GCC unroll 2
    for (int part = 0; part < T::kParts; ++part) {
      int32x4_t iacc[kMR][kNRV];
#pragma GCC unroll 4
      for (int t = 0; t < kMR; ++t) {
#pragma GCC unroll 4
        for (int v = 0; v < kNRV; ++v) iacc[t][v] = vdupq_n_s32(0);
      }
#pragma GCC unroll 8
      for (int s = part * T::kPartSteps; s < (part + 1) * T::kPartSteps; ++s) {
        const int8x16_t xv = vld1q_s8(reinterpret_cast<const int8_t*>(xb + s * kMR * 4));
#pragma GCC unroll 4
        for (int v = 0; v < kNRV; ++v) {
          const int8x16_t wv = vld1q_s8(reinterpret_cast<const int8_t*>(wb + (s * kNR + 4 * v) * 4));
          iacc[0][v] = sdot_lane<0>(iacc[0][v], wv, xv);
          iacc[1][v] = sdot_lane<1>(iacc[1][v], wv, xv);
          iacc[2][v] = sdot_lane<2>(iacc[2][v], wv, xv);
          iacc[3][v] = sdot_lane<3>(iacc[3][v], wv, xv);
        }
      }
#pragma GCC unroll 4
      for (int t = 0; t < kMR; ++t) {
#pragma GCC unroll 4
        for (int v = 0; v < kNRV; ++v) {
          if constexpr (T::kSubScales) {
            const int32x4_t sub = vld1q_s32(subs + part * kNR + 4 * v);
            isum[t][v] = part == 0 ? vmulq_s32(iacc[t][v], sub) : vmlaq_s32(isum[t][v], iacc[t][v], sub);
          } else {
            isum[t][v] = iacc[t][v];
          }
        }
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < kMR; ++t) {
#pragma GCC unroll 4
      for (int v = 0; v < kNRV; ++v) {
        const float32x4_t s = vmulq_n_f32(vld1q_f32(ws + 4 * v), xs[t]);
        facc[t][v] = vfmaq_f32(facc[t][v], vcvtq_f32_s32(isum[t][v]), s);
      }
      if constexpr (kMins && T::kSubScales) {
        // q2_K: + (-dmin) * d_x * sum_h m_h * (half h's sum of x_q).
        const auto* half_mins = subs + 2 * kNR;
        const auto* min_scales = reinterpret_cast<const float*>(half_mins + 2 * kNR);
#pragma GCC unroll 4
        for (int v = 0; v < kNRV; ++v) {
          const int32x4_t m = vmlaq_s32(vmulq_s32(vld1q_s32(half_mins + 4 * v), vdupq_n_s32(xsum[kMR + t])),
                                        vld1q_s32(half_mins + kNR + 4 * v), vdupq_n_s32(xsum[2 * kMR + t]));
          const float32x4_t s = vmulq_n_f32(vld1q_f32(min_scales + 4 * v), xs[t]);
          facc[t][v] = vfmaq_f32(facc[t][v], vcvtq_f32_s32(m), s);
        }
      } else if constexpr (kMins) {
        // + m * d_x * sum(x_q)
        const float sxs = xs[t] * static_cast<float>(xsum[t]);
#pragma GCC unroll 4
        for (int v = 0; v < kNRV; ++v) facc[t][v] = vfmaq_n_f32(facc[t][v], vld1q_f32(ws + kNR + 4 * v), sxs);
      }
    }
  }
  store_tile<kMR, kNRV>(facc, c, ldc, mt, nr, first);
}

#if defined(KVSLIM_HAS_NEON_I8MM)
// The i8mm kernel (G = 8): per step of 8 values, each pair of tokens (one vector: 2 x 8 bytes)
// times each pair of rows (one vector) in one smmla. Accumulator [p][q] holds tokens 2p, 2p + 1
// x rows 2q, 2q + 1 as [t0 r0, t0 r1, t1 r0, t1 r1]; the scales d_w * d_x and the mins' terms
// are built in the same layout, so each element sees the sdot kernel's f32 operations.
template <class T, bool kMins>
void micro_kernel_mmla(const uint8_t* xp, const uint8_t* wp, int64_t nbk, float* c, int64_t ldc, int mt, int nr,
                       bool first) {
  constexpr int kMR = T::kMR, kNR = T::kNR, kTP = kMR / 2, kRP = kNR / 2;
  static_assert(T::kG == 8);
  for (int t = 0; t < mt; ++t) {
    __builtin_prefetch(c + t * ldc, 1, 3);
    __builtin_prefetch(c + t * ldc + kNR - 1, 1, 3);
  }
  float32x4_t facc[kTP][kRP];
#pragma GCC unroll 4
  for (int p = 0; p < kTP; ++p) {
#pragma GCC unroll 8
    for (int q = 0; q < kRP; ++q) facc[p][q] = vdupq_n_f32(0);
  }
  for (int64_t b = 0; b < nbk; ++b) {
    const uint8_t* xb = xp + b * T::kXBlockBytes;
    const uint8_t* wb = wp + b * T::kWBlockBytes;
    const auto* xs = reinterpret_cast<const float*>(xb + T::kXLevels);
    const auto* xsum = reinterpret_cast<const int32_t*>(xs + kMR);
    const auto* ws = reinterpret_cast<const float*>(wb + T::kWLevels);
    const auto* subs = reinterpret_cast<const int32_t*>(ws + kNR);
    int32x4_t isum[kTP][kRP];  // the block's int32 sums, laid out as the tiles
#pragma GCC unroll 2
    for (int part = 0; part < T::kParts; ++part) {
      int32x4_t iacc[kTP][kRP];
#pragma GCC unroll 4
      for (int p = 0; p < kTP; ++p) {
#pragma GCC unroll 8
        for (int q = 0; q < kRP; ++q) iacc[p][q] = vdupq_n_s32(0);
      }
#pragma GCC unroll 4
      for (int s = part * T::kPartSteps; s < (part + 1) * T::kPartSteps; ++s) {
        int8x16_t xv[kTP];
#pragma GCC unroll 4
        for (int p = 0; p < kTP; ++p) xv[p] = vld1q_s8(reinterpret_cast<const int8_t*>(xb + (s * kMR + 2 * p) * 8));
#pragma GCC unroll 8
        for (int q = 0; q < kRP; ++q) {
          const int8x16_t wv = vld1q_s8(reinterpret_cast<const int8_t*>(wb + (s * kNR + 2 * q) * 8));
#pragma GCC unroll 4
          for (int p = 0; p < kTP; ++p) iacc[p][q] = vmmlaq_s32(iacc[p][q], xv[p], wv);
        }
      }
#pragma GCC unroll 4
      for (int p = 0; p < kTP; ++p) {
#pragma GCC unroll 8
        for (int q = 0; q < kRP; ++q) {
          if constexpr (T::kSubScales) {
            // [sub(r0), sub(r1), sub(r0), sub(r1)] for rows r0 = 2q, r1 = 2q + 1.
            const int32x2_t s2 = vld1_s32(subs + part * kNR + 2 * q);
            const int32x4_t sub = vcombine_s32(s2, s2);
            isum[p][q] = part == 0 ? vmulq_s32(iacc[p][q], sub) : vmlaq_s32(isum[p][q], iacc[p][q], sub);
          } else {
            isum[p][q] = iacc[p][q];
          }
        }
      }
    }
#pragma GCC unroll 4
    for (int p = 0; p < kTP; ++p) {
      // [d_x(t0), d_x(t0), d_x(t1), d_x(t1)] for tokens t0 = 2p, t1 = 2p + 1.
      const float32x4_t sx = vcombine_f32(vdup_n_f32(xs[2 * p]), vdup_n_f32(xs[2 * p + 1]));
      float32x4_t sxs = vdupq_n_f32(0);
      if constexpr (kMins && !T::kSubScales) {
        sxs = vcombine_f32(vdup_n_f32(xs[2 * p] * static_cast<float>(xsum[2 * p])),
                           vdup_n_f32(xs[2 * p + 1] * static_cast<float>(xsum[2 * p + 1])));
      }
#pragma GCC unroll 8
      for (int q = 0; q < kRP; ++q) {
        // [d_w(r0), d_w(r1), d_w(r0), d_w(r1)] for rows r0 = 2q, r1 = 2q + 1.
        const float32x2_t w2 = vld1_f32(ws + 2 * q);
        const float32x4_t s = vmulq_f32(vcombine_f32(w2, w2), sx);
        facc[p][q] = vfmaq_f32(facc[p][q], vcvtq_f32_s32(isum[p][q]), s);
        if constexpr (kMins && T::kSubScales) {
          // q2_K, as the sdot kernel: [t0 r0, t0 r1, t1 r0, t1 r1] of sum_h m_h * (half h's sum of x_q).
          const auto* half_mins = subs + 2 * kNR;
          const auto* min_scales = reinterpret_cast<const float*>(half_mins + 2 * kNR);
          int32x4_t m = vdupq_n_s32(0);
#pragma GCC unroll 2
          for (int h = 0; h < 2; ++h) {
            const int32x2_t m2 = vld1_s32(half_mins + h * kNR + 2 * q);
            const int32x4_t hsum =
                vcombine_s32(vdup_n_s32(xsum[(1 + h) * kMR + 2 * p]), vdup_n_s32(xsum[(1 + h) * kMR + 2 * p + 1]));
            m = vmlaq_s32(m, vcombine_s32(m2, m2), hsum);
          }
          const float32x2_t n2 = vld1_f32(min_scales + 2 * q);
          facc[p][q] = vfmaq_f32(facc[p][q], vcvtq_f32_s32(m), vmulq_f32(vcombine_f32(n2, n2), sx));
        } else if constexpr (kMins) {
          const float32x2_t m2 = vld1_f32(ws + kNR + 2 * q);
          facc[p][q] = vfmaq_f32(facc[p][q], vcombine_f32(m2, m2), sxs);
        }
      }
    }
  }
  // Unzip the 2 x 2 tiles into each token's rows: token 2p's rows 4v .. 4v + 3 are the low
  // halves of tiles [p][2v] and [p][2v + 1], token 2p + 1's their high halves.
  float32x4_t out[kMR][kNR / 4];
#pragma GCC unroll 4
  for (int p = 0; p < kTP; ++p) {
#pragma GCC unroll 4
    for (int v = 0; v < kNR / 4; ++v) {
      out[2 * p][v] = vcombine_f32(vget_low_f32(facc[p][2 * v]), vget_low_f32(facc[p][2 * v + 1]));
      out[2 * p + 1][v] = vcombine_f32(vget_high_f32(facc[p][2 * v]), vget_high_f32(facc[p][2 * v + 1]));
    }
  }
  store_tile<kMR, kNR / 4>(out, c, ldc, mt, nr, first);
}
#endif

template <class T, bool kMins>
inline void micro_kernel(const uint8_t* xp, const uint8_t* wp, int64_t nbk, float* c, int64_t ldc, int mt, int nr,
                         bool first) {
#if defined(KVSLIM_HAS_NEON_I8MM)
  if constexpr (T::kG == 8) {
    micro_kernel_mmla<T, kMins>(xp, wp, nbk, c, ldc, mt, nr, first);
    return;
  }
#endif
  if constexpr (T::kG == 4) micro_kernel_sdot<T, kMins>(xp, wp, nbk, c, ldc, mt, nr, first);
}

template <class T>
void gemm(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  const bool has_mins = int8_has_mins(w.type);
  int8_gemm<T::kMR, T::kNR, T::kXBlockBytes, T::kWBlockBytes>(
      w, x, n, y, pool, pack_x_panel<T>, pack_w_panel<T>,
      [has_mins](const uint8_t* xp, const uint8_t* wp, int64_t nbk, float* c, int64_t ldc, int mt, int nr, bool first) {
        if (has_mins) {
          micro_kernel<T, true>(xp, wp, nbk, c, ldc, mt, nr, first);
        } else {
          micro_kernel<T, false>(xp, wp, nbk, c, ldc, mt, nr, first);
        }
      });
}

}  // namespace

void matmul_q8_neon(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  if (!matmul_q8_takes(w.type)) fail("matmul_q8: {} weights have no int8 GEMM", dtype_name(w.type));
  if (int8_has_halves(w.type)) {
    // 4 x 8 at dotprod too: a second set of int32 sums (the block's, beside a half's) would not
    // fit 4 x 12 in the 32 registers.
#if defined(KVSLIM_HAS_NEON_I8MM)
    return gemm<Tile<4, 8, 8, true>>(w, x, n, y, pool);
#else
    return gemm<Tile<4, 8, 4, true>>(w, x, n, y, pool);
#endif
  }
#if defined(KVSLIM_HAS_NEON_I8MM)
  gemm<Tile<4, 8, 8>>(w, x, n, y, pool);
#else
  gemm<Tile<4, 12, 4>>(w, x, n, y, pool);
#endif
}

#else

void matmul_q8_neon(const WeightView&, const float*, int64_t, float*, ThreadPool&) {
  fail("matmul_q8: this level has no NEON int8 GEMM");
}

#endif

}  // namespace kvslim::KVSLIM_ISA_NS::detail
