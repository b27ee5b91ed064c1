// matmul: Y = X W^T for a batch of n activation rows (prefill).
//
// f32/f16/bf16, and every block type at the scalar level, use a blocked f32 GEMM of our own (measured within ~10% of
// OpenBLAS's sgemm, without its extra packing pass or thread pool): X is packed once into panels of kMR tokens
// ([kc][kMR] floats per K slice, shared by all threads; slice-major, see gemm_panels); threads take chunks of kNR-row
// weight panels from a queue and, for each kKC-deep slice of K, convert a panel to f32 in [k][kNR] order (converted 16
// values at a time and transposed in registers) and run the kMR x kNR register-blocked micro-kernel over all token
// panels, prefetching the next panel's weights meanwhile; the sums over K slices build up in a per-thread buffer of
// whole tiles and are written to Y once. The types detail::matmul_q8_takes go to the int8 kernels instead (q8_0-style
// activations of 32): AVX-512 VNNI in matmul_q8.cpp (2.5x the f32 GEMM's speed), AMX-INT8 tiles where the CPU and
// kernel allow (matmul_q8_amx.cpp; KVSLIM_NO_AMX=1 keeps the VNNI kernel), at the AVX2 level the maddubs kernel of
// matmul_q8_avx2.cpp (and for q2_K / q3_K / q6_K at every x86 level), on aarch64 the kernels of matmul_q8_neon.cpp
// (sdot / smmla at dotprod / i8mm); all give identical bits. BF16 weights on AMD CPUs with AVX512-BF16 (Zen 4 and
// later) go through the same blocked GEMM with bf16 panels and vdpbf16ps (Bf16Panels; x rounded to bf16 as decode
// rounds it), and F16 / BF16 weights on AMX-BF16 tiles where usable (matmul_bf16_amx.cpp). Each output is computed by
// one thread in a fixed order, so results do not depend on the number of threads.
#include <algorithm>
#include <cstring>
#include <span>
#include <vector>

#include "tensor/kernels.h"
#include "tensor/matmul_internal.h"
#include "tensor/ops.h"
#include "tensor/quant_dot.h"
#include "util/error.h"
#include "tensor/tensor_isa.h"

#include "tensor/isa_begin.h"
#include "tensor/simd.h"
#include "tensor/transpose16.h"

namespace kvslim::KVSLIM_ISA_NS {
namespace {

#if defined(KVSLIM_HAS_AVX512F)
constexpr int kMR = 14;  // tokens per micro-tile
constexpr int kNR = 32;  // weight rows per micro-tile (two 16-float vectors)
#elif defined(KVSLIM_HAS_AVX2) && defined(KVSLIM_HAS_FMA)
constexpr int kMR = 6;
constexpr int kNR = 16;
#elif defined(KVSLIM_HAS_NEON)
constexpr int kMR = 8;   // tokens per micro-tile (two 4-float vectors, read by lane)
constexpr int kNR = 12;  // weight rows per micro-tile (three 4-float vectors)
#else
constexpr int kMR = 4;
constexpr int kNR = 8;
#endif
constexpr int64_t kKC = 256;            // depth of one K slice (a multiple of 256, so every block type stays whole)
constexpr int64_t kPrefetchPanels = 8;  // token panels over which the next weight slice is prefetched

#if defined(KVSLIM_HAS_AVX512F) && defined(KVSLIM_HAS_AVX512BW) && defined(KVSLIM_HAS_AVX512VL)
// 16 consecutive values of a row as f32 (masked: the rest are 0).
inline __m512 load16_as_f32(DType type, const uint8_t* row, int64_t k, __mmask16 m) {
  switch (type) {
    case DType::F32: return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + k);
    case DType::F16: return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + k));
    case DType::BF16:
      return _mm512_castsi512_ps(_mm512_slli_epi32(
          _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + k)), 16));
    default: break;  // block types are dequantised through tmp
  }
  return _mm512_setzero_ps();
}
#define KVSLIM_TRANSPOSE_PACK 1
#elif defined(KVSLIM_HAS_AVX2) && defined(KVSLIM_HAS_F16C)
// 8 consecutive values of a row as f32.
inline __m256 load8_as_f32(DType type, const uint8_t* row, int64_t k) {
  switch (type) {
    case DType::F16:
      return _mm256_cvtph_ps(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(row) + k)));
    case DType::BF16:
      return _mm256_castsi256_ps(_mm256_slli_epi32(
          _mm256_cvtepu16_epi32(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(row) + k))),
          16));
    default: return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + k);  // f32 (block types: their f32 copy)
  }
}
#define KVSLIM_TRANSPOSE_PACK_AVX2 1
#endif

// Columns [k0, ...) of kMR whole token rows to d[(kk - k0) * kMR + t], a register tile of
// columns at a time (the scalar loop's strided stores took 2.4% of an AVX2 F16 prefill); returns
// the first column left to the caller. A transposed column holds its kMR tokens and then zeros:
// the stores overlap, each column's zeros overwritten by the next one's tokens, and the tile's
// last column stores its kMR values only, so nothing past the tile is written (the next panel's
// slice may be another thread's).
#if defined(KVSLIM_TRANSPOSE_PACK)
int64_t transpose_x_columns(const float* const* rows, int64_t k0, int64_t k1, float* d) {
  static_assert(kMR <= 16);
  int64_t kk = k0;
  for (; kk + 16 <= k1; kk += 16) {
    __m512 v[16];
    for (int t = 0; t < 16; ++t) v[t] = t < kMR ? _mm512_loadu_ps(rows[t] + kk) : _mm512_setzero_ps();
    detail::transpose16x16_ps(v);
    float* o = d + (kk - k0) * kMR;
    for (int c = 0; c < 15; ++c) _mm512_storeu_ps(o + c * kMR, v[c]);
    _mm512_mask_storeu_ps(o + 15 * kMR, detail::first_lanes16(kMR), v[15]);
  }
  return kk;
}
#elif defined(KVSLIM_TRANSPOSE_PACK_AVX2)
int64_t transpose_x_columns(const float* const* rows, int64_t k0, int64_t k1, float* d) {
  static_assert(kMR == 6);  // the last column's store below is 4 + 2 floats
  int64_t kk = k0;
  for (; kk + 8 <= k1; kk += 8) {
    __m256 v[8];
    for (int t = 0; t < 8; ++t) v[t] = t < kMR ? _mm256_loadu_ps(rows[t] + kk) : _mm256_setzero_ps();
    detail::transpose8x8_ps(v);
    float* o = d + (kk - k0) * kMR;
    for (int c = 0; c < 7; ++c) _mm256_storeu_ps(o + c * kMR, v[c]);
    _mm_storeu_ps(o + 7 * kMR, _mm256_castps256_ps128(v[7]));
    _mm_storel_pi(reinterpret_cast<__m64*>(o + 7 * kMR + 4), _mm256_extractf128_ps(v[7], 1));
  }
  return kk;
}
#else
int64_t transpose_x_columns(const float* const*, int64_t k0, int64_t, float*) { return k0; }
#endif

// Packs columns [0, cols) of mt <= kMR token rows of 32-bit values (floats, or bf16 pairs seen
// as floats: only moved, never computed on) slice by slice: column c of token t goes to
// dst[(c / slice_cols) * slice_stride + (c % slice_cols) * kMR + t]; tokens past mt are 0.
void pack_token_columns(const float* const* rows, int mt, int64_t cols, int64_t slice_cols, float* dst,
                        int64_t slice_stride) {
  if (mt < kMR) {
    for (int64_t c0 = 0; c0 < cols; c0 += slice_cols)
      std::memset(dst + c0 / slice_cols * slice_stride, 0,
                  static_cast<size_t>(std::min(slice_cols, cols - c0)) * kMR * sizeof(float));
  }
  constexpr int64_t kStep = 64;  // divides slice_cols: each step lies in one slice
  for (int64_t c0 = 0; c0 < cols; c0 += kStep) {
    const int64_t c1 = std::min(cols, c0 + kStep);
    float* d = dst + c0 / slice_cols * slice_stride + (c0 % slice_cols) * kMR;
    const int64_t done = mt == kMR ? transpose_x_columns(rows, c0, c1, d) : c0;
    for (int t = 0; t < mt; ++t) {
      const float* src = rows[t];
      // memcpy: bf16 pairs are not floats, and must not be read as ones (aliasing).
      for (int64_t c = done; c < c1; ++c) std::memcpy(d + (c - c0) * kMR + t, src + c, sizeof(float));
    }
  }
}

// Packs tokens [t0, t0 + kMR) of x (n x k, row-major) slice by slice: column kk of token t goes
// to dst[(kk / kKC) * slice_stride + (kk % kKC) * kMR + t]; missing tokens are 0.
// For block-quantised weights, each row is first rounded through the activation quantisation
// that the type's integer dot products use (q8_0 blocks, or q8_K for K-quants), so results do
// not depend on which kernel (decode's or prefill's) computed them.
void pack_x_panel(const float* x, int64_t ldx, int64_t n, int64_t k, int64_t t0, float* dst, int64_t slice_stride,
                  DType wtype) {
  const int mt = static_cast<int>(std::min<int64_t>(kMR, n - t0));
  const float* rows[kMR];
  if (dtype_is_quantized(wtype)) {
    thread_local detail::Scratch q_scratch;
    auto* q = static_cast<float*>(q_scratch.get(static_cast<size_t>(kMR) * k * sizeof(float)));
    for (int t = 0; t < mt; ++t) {
      if (wtype == DType::Q8_0) {
        detail::round_through_q8_activations(x + (t0 + t) * ldx, k, q + t * k);
      } else {
        detail::round_through_quant_activations(wtype, x + (t0 + t) * ldx, k, q + t * k);
      }
      rows[t] = q + t * k;
    }
  } else {
    for (int t = 0; t < mt; ++t) rows[t] = x + (t0 + t) * ldx;
  }
  pack_token_columns(rows, mt, k, kKC, dst, slice_stride);
}

#if defined(KVSLIM_TRANSPOSE_PACK) || defined(KVSLIM_TRANSPOSE_PACK_AVX2)
// Where the register-transposing packs read rows [r0, r0 + nr) of a K slice from: copies of the
// 16-bit types' rows (into tmp, kStageBytes apart), their f32 dequantisation for the block types
// (into tmp, kKC floats a row), the weights themselves for f32. Rows from nr to kNR are null
// (packed as 0).
//
// Why the copies: a weight's rows lie a multiple of 4 KiB apart for every model shape, so the 16
// rows a transpose loads at one column all fall in one L1 set, and those loads took about three
// times as long as the same lines read row by row (Zen 5, 2026-12-06). Copied row by row into
// rows 576 bytes apart (16 rows in 16 sets), they are read back from L1 without conflicts.
constexpr int64_t kStageBytes = kKC * 2 + 64;
static_assert(kNR * kStageBytes <= kNR * kKC * static_cast<int64_t>(sizeof(float)), "the copies fit in tmp");
struct PanelRows {
  const uint8_t* rows[kNR];
  DType type;    // what the rows hold
  int64_t base;  // the column in rows[j] where the slice starts
};
PanelRows panel_rows(const WeightView& w, int64_t r0, int nr, int64_t k0, int64_t kc, float* tmp) {
  const bool blocks = dtype_is_quantized(w.type);
  const bool copied = w.type == DType::F16 || w.type == DType::BF16;
  PanelRows p{{}, blocks ? DType::F32 : w.type, blocks || copied ? 0 : k0};
  auto* stage = reinterpret_cast<uint8_t*>(tmp);
  for (int j = 0; j < nr; ++j) {
    if (blocks) {
      KVSLIM_ISA_NS::convert_to_f32(w.type, w.row(r0 + j) + row_bytes(w.type, k0), tmp + j * kKC, kc);
      p.rows[j] = reinterpret_cast<const uint8_t*>(tmp + j * kKC);
    } else if (copied) {
      uint8_t* row = stage + j * kStageBytes;
      const uint8_t* src = w.row(r0 + j) + 2 * k0;
      if (kc == kKC) {
        std::memcpy(row, src, 2 * kKC);  // a constant size: vector moves, not a call
      } else {
        std::memcpy(row, src, static_cast<size_t>(2 * kc));
      }
      p.rows[j] = row;
    } else {
      p.rows[j] = w.row(r0 + j);
    }
  }
  return p;
}
#endif

// Converts rows [r0, r0 + kNR) x columns [k0, k0 + kc) of w to f32 as dst[kk * kNR + j];
// rows past the end are 0. tmp holds kNR * kKC floats (panel_rows' copies of 16-bit rows, or
// the block types' rows in f32).
void pack_w_panel(const WeightView& w, int64_t r0, int64_t k0, int64_t kc, float* dst, float* tmp) {
  const int nr = static_cast<int>(std::min<int64_t>(kNR, w.rows - r0));
#if defined(KVSLIM_TRANSPOSE_PACK)
  // Rows are converted 16 values at a time and transposed in registers, 16 rows per tile.
  const PanelRows src = panel_rows(w, r0, nr, k0, kc, tmp);
  const uint8_t* const* rows = src.rows;
  const DType src_type = src.type;
  const int64_t base = src.base;
  for (int64_t kk = 0; kk < kc; kk += 16) {
    const int cols = static_cast<int>(std::min<int64_t>(16, kc - kk));
    const __mmask16 m = detail::first_lanes16(cols);
    for (int half = 0; half < kNR / 16; ++half) {
      __m512 v[16];
      for (int i = 0; i < 16; ++i) {
        const uint8_t* row = rows[16 * half + i];
        v[i] = row != nullptr ? load16_as_f32(src_type, row, base + kk, m) : _mm512_setzero_ps();
      }
      detail::transpose16x16_ps(v);
      for (int c = 0; c < cols; ++c) _mm512_storeu_ps(dst + (kk + c) * kNR + 16 * half, v[c]);
    }
  }
#elif defined(KVSLIM_TRANSPOSE_PACK_AVX2)
  // Rows are converted 8 values at a time and transposed in registers, 8 rows per tile, straight
  // from the weights (a separate conversion pass through tmp and a scalar transpose cost 12% of
  // an F16 prefill). Columns past the last multiple of 8 are packed one by one.
  const PanelRows src = panel_rows(w, r0, nr, k0, kc, tmp);
  const uint8_t* const* rows = src.rows;
  const DType src_type = src.type;
  const int64_t base = src.base;
  const int64_t kc8 = kc / 8 * 8;
  for (int half = 0; half < kNR / 8; ++half) {
    for (int64_t kk = 0; kk < kc8; kk += 8) {
      __m256 v[8];
      for (int i = 0; i < 8; ++i) {
        const uint8_t* row = rows[8 * half + i];
        v[i] = row != nullptr ? load8_as_f32(src_type, row, base + kk) : _mm256_setzero_ps();
      }
      detail::transpose8x8_ps(v);
      for (int c = 0; c < 8; ++c) _mm256_storeu_ps(dst + (kk + c) * kNR + 8 * half, v[c]);
    }
  }
  for (int64_t kk = kc8; kk < kc; ++kk) {
    for (int j = 0; j < kNR; ++j) {
      float v = 0.0f;
      if (rows[j] != nullptr) {
        switch (src_type) {
          case DType::F16: v = fp16_to_fp32(reinterpret_cast<const uint16_t*>(rows[j])[base + kk]); break;
          case DType::BF16: v = bf16_to_fp32(reinterpret_cast<const uint16_t*>(rows[j])[base + kk]); break;
          default: v = reinterpret_cast<const float*>(rows[j])[base + kk]; break;
        }
      }
      dst[kk * kNR + j] = v;
    }
  }
#else
  for (int j = 0; j < nr; ++j) {
    const uint8_t* row = w.row(r0 + j);
    float* t = tmp + j * kKC;
    switch (w.type) {
      case DType::F32: std::memcpy(t, reinterpret_cast<const float*>(row) + k0, static_cast<size_t>(kc) * 4); break;
      case DType::F16:
        KVSLIM_ISA_NS::convert_to_f32(DType::F16, reinterpret_cast<const uint16_t*>(row) + k0, t, kc);
        break;
      case DType::BF16:
        KVSLIM_ISA_NS::convert_to_f32(DType::BF16, reinterpret_cast<const uint16_t*>(row) + k0, t, kc);
        break;
      default: KVSLIM_ISA_NS::convert_to_f32(w.type, row + row_bytes(w.type, k0), t, kc); break;
    }
  }
  for (int j = nr; j < kNR; ++j) std::memset(tmp + j * kKC, 0, static_cast<size_t>(kc) * 4);
  for (int64_t kk = 0; kk < kc; ++kk) {
    for (int j = 0; j < kNR; ++j) dst[kk * kNR + j] = tmp[j * kKC + kk];
  }
#endif
}

// c[t * kNR + j] (+)= sum_kk xp[kk][t] * wp[kk][j]: one whole kMR x kNR tile of the GEMM's
// contiguous accumulation buffer (gemm_panels), written on a K slice's first pass and added to on
// the later ones. Padding tokens and rows are zeros in the panels, so every tile is whole.
#if defined(KVSLIM_HAS_AVX512F)
// Writes (first) or adds the kMR x kNR accumulators of a 512-bit kernel to the tile c.
inline void store_acc(const __m512 (&acc)[kMR][2], float* c, bool first) {
#pragma GCC unroll 14
  for (int t = 0; t < kMR; ++t) {
    float* ct = c + t * kNR;
    __m512 v0 = acc[t][0], v1 = acc[t][1];
    if (!first) {
      v0 = _mm512_add_ps(v0, _mm512_loadu_ps(ct));
      v1 = _mm512_add_ps(v1, _mm512_loadu_ps(ct + 16));
    }
    _mm512_storeu_ps(ct, v0);
    _mm512_storeu_ps(ct + 16, v1);
  }
}

void micro_kernel(const float* xp, const float* wp, int64_t kc, float* c, bool first) {
  __m512 acc[kMR][2];
#pragma GCC unroll 14
  for (int t = 0; t < kMR; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
  for (int64_t kk = 0; kk < kc; ++kk) {
    const __m512 w0 = _mm512_loadu_ps(wp + kk * kNR);
    const __m512 w1 = _mm512_loadu_ps(wp + kk * kNR + 16);
    const float* xk = xp + kk * kMR;
#pragma GCC unroll 14
    for (int t = 0; t < kMR; ++t) {
      const __m512 xb = _mm512_set1_ps(xk[t]);
      acc[t][0] = _mm512_fmadd_ps(xb, w0, acc[t][0]);
      acc[t][1] = _mm512_fmadd_ps(xb, w1, acc[t][1]);
    }
  }
  store_acc(acc, c, first);
}
#elif defined(KVSLIM_HAS_AVX2) && defined(KVSLIM_HAS_FMA)
// 12 accumulators, two weight vectors and one broadcast: 15 of the 16 ymm registers. Every
// index into acc is a constant after unrolling, so the accumulators stay in registers (an
// epilogue that indexed them by the runtime mt made GCC mirror all 12 to the stack on every
// step of k, which halved the kernel's speed).
void micro_kernel(const float* xp, const float* wp, int64_t kc, float* c, bool first) {
  __m256 acc[kMR][2];
#pragma GCC unroll 6
  for (int t = 0; t < kMR; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
#pragma GCC unroll 2
  for (int64_t kk = 0; kk < kc; ++kk) {
    const __m256 w0 = _mm256_loadu_ps(wp + kk * kNR);
    const __m256 w1 = _mm256_loadu_ps(wp + kk * kNR + 8);
    const float* xk = xp + kk * kMR;
#pragma GCC unroll 6
    for (int t = 0; t < kMR; ++t) {
      const __m256 xb = _mm256_broadcast_ss(xk + t);
      acc[t][0] = _mm256_fmadd_ps(xb, w0, acc[t][0]);
      acc[t][1] = _mm256_fmadd_ps(xb, w1, acc[t][1]);
    }
  }
#pragma GCC unroll 6
  for (int t = 0; t < kMR; ++t) {
    float* ct = c + t * kNR;
    __m256 v0 = acc[t][0], v1 = acc[t][1];
    if (!first) {
      v0 = _mm256_add_ps(v0, _mm256_loadu_ps(ct));
      v1 = _mm256_add_ps(v1, _mm256_loadu_ps(ct + 8));
    }
    _mm256_storeu_ps(ct, v0);
    _mm256_storeu_ps(ct + 8, v1);
  }
}
#elif defined(KVSLIM_HAS_NEON)
// 24 accumulators (8 tokens x 12 rows), three weight vectors and two vectors of 8 tokens' x,
// multiplied by lane (vfmaq_laneq_f32, no broadcasts): 29 of the 32 NEON registers. As in the
// AVX2 kernel, every index into acc is a constant after unrolling, so it stays in registers.
void micro_kernel(const float* xp, const float* wp, int64_t kc, float* c, bool first) {
  float32x4_t acc[kMR][3];
#pragma GCC unroll 8
  for (int t = 0; t < kMR; ++t) acc[t][0] = acc[t][1] = acc[t][2] = vdupq_n_f32(0);
#pragma GCC unroll 2
  for (int64_t kk = 0; kk < kc; ++kk) {
    const float* wk = wp + kk * kNR;
    const float32x4_t w0 = vld1q_f32(wk), w1 = vld1q_f32(wk + 4), w2 = vld1q_f32(wk + 8);
    const float32x4_t x0 = vld1q_f32(xp + kk * kMR), x1 = vld1q_f32(xp + kk * kMR + 4);
#define KVSLIM_NEON_FMA_TOKEN(t, xv, lane)              \
  acc[t][0] = vfmaq_laneq_f32(acc[t][0], w0, xv, lane); \
  acc[t][1] = vfmaq_laneq_f32(acc[t][1], w1, xv, lane); \
  acc[t][2] = vfmaq_laneq_f32(acc[t][2], w2, xv, lane);
    KVSLIM_NEON_FMA_TOKEN(0, x0, 0)
    KVSLIM_NEON_FMA_TOKEN(1, x0, 1)
    KVSLIM_NEON_FMA_TOKEN(2, x0, 2)
    KVSLIM_NEON_FMA_TOKEN(3, x0, 3)
    KVSLIM_NEON_FMA_TOKEN(4, x1, 0)
    KVSLIM_NEON_FMA_TOKEN(5, x1, 1)
    KVSLIM_NEON_FMA_TOKEN(6, x1, 2)
    KVSLIM_NEON_FMA_TOKEN(7, x1, 3)
#undef KVSLIM_NEON_FMA_TOKEN
  }
#pragma GCC unroll 8
  for (int t = 0; t < kMR; ++t) {
    float* ct = c + t * kNR;
#pragma GCC unroll 3
    for (int v = 0; v < 3; ++v) {
      float32x4_t o = acc[t][v];
      if (!first) o = vaddq_f32(o, vld1q_f32(ct + 4 * v));
      vst1q_f32(ct + 4 * v, o);
    }
  }
}
#else
void micro_kernel(const float* xp, const float* wp, int64_t kc, float* c, bool first) {
  float acc[kMR][kNR] = {};
  for (int64_t kk = 0; kk < kc; ++kk) {
    for (int t = 0; t < kMR; ++t) {
      const float xv = xp[kk * kMR + t];
      for (int j = 0; j < kNR; ++j) acc[t][j] += xv * wp[kk * kNR + j];
    }
  }
  for (int t = 0; t < kMR; ++t) {
    for (int j = 0; j < kNR; ++j) c[t * kNR + j] = first ? acc[t][j] : c[t * kNR + j] + acc[t][j];
  }
}
#endif

// The panels of the blocked GEMM: x as [kc][kMR] floats per K slice (pack_x_panel), weight rows converted to
// f32 as [kc][kNR], multiplied by micro_kernel. A format names its element types, how long a
// token panel's K slice is, and its packing and kernel.
struct F32Panels {
  using XElem = float;
  using WElem = float;
  static constexpr bool kPrefetchWeights = true;  // weights stream from DRAM
  static int64_t x_slice_elems(int64_t kc) { return kc * kMR; }
  static void pack_x(const float* x, int64_t ldx, int64_t n, int64_t k, int64_t t0, float* dst, int64_t slice_stride,
                     DType wtype) {
    pack_x_panel(x, ldx, n, k, t0, dst, slice_stride, wtype);
  }
  static void pack_w(const WeightView& w, int64_t r0, int64_t k0, int64_t kc, float* dst, float* tmp) {
    pack_w_panel(w, r0, k0, kc, dst, tmp);
  }
  static void kernel(const float* xp, const float* wp, int64_t kc, float* c, bool first) {
    micro_kernel(xp, wp, kc, c, first);
  }
};

// f32 panels of a W given as its transpose: w.data holds W^T, w.cols rows of w.rows floats (as
// attention's values are stored: token-major), so a panel's [kc][kNR] layout is read straight
// from consecutive rows of W^T, with no transpose. The operands are already in cache.
struct F32TransposedPanels : F32Panels {
  static constexpr bool kPrefetchWeights = false;
  static void pack_w(const WeightView& w, int64_t r0, int64_t k0, int64_t kc, float* dst, float*) {
    const int nr = static_cast<int>(std::min<int64_t>(kNR, w.rows - r0));
    const float* wt = static_cast<const float*>(w.data);
    for (int64_t kk = 0; kk < kc; ++kk) {
      const float* src = wt + (k0 + kk) * w.rows + r0;
      float* d = dst + kk * kNR;
      std::copy_n(src, nr, d);
      std::fill(d + nr, d + kNR, 0.0f);
    }
  }
};

#if defined(KVSLIM_BF16_DOT)
// The bf16 panels (BF16 weights where detail::bf16_dot_gemm_preferred): x rounded to bf16 as
// decode rounds it (convert_from_f32, nearest even), packed as [kc/2][kMR] pairs per K slice (one 32-bit word
// per token and two columns); weight rows as stored, as [kc/2][kNR] pairs. One vdpbf16ps
// multiplies a broadcast token pair with 16 rows' pairs: twice the products of an f32 FMA, and
// the weights are never widened.
struct Bf16Panels {
  using XElem = uint32_t;
  using WElem = uint16_t;
  static constexpr bool kPrefetchWeights = true;
  static int64_t x_slice_elems(int64_t kc) { return (kc + 1) / 2 * kMR; }

  // Pair p of token t goes to dst[(p / (kKC / 2)) * slice_stride + (p % (kKC / 2)) * kMR + t].
  static void pack_x(const float* x, int64_t ldx, int64_t n, int64_t k, int64_t t0, uint32_t* dst, int64_t slice_stride,
                     DType) {
    const int64_t pairs = (k + 1) / 2;
    const int mt = static_cast<int>(std::min<int64_t>(kMR, n - t0));
    // Each token's row rounded to bf16; its pairs, low column in the low half (little-endian),
    // are the 32-bit words packed like the f32 panels' columns.
    thread_local detail::Scratch scratch;
    auto* xb = static_cast<uint16_t*>(scratch.get(static_cast<size_t>(kMR * 2 * pairs) * sizeof(uint16_t)));
    const float* rows[kMR];
    for (int t = 0; t < mt; ++t) {
      uint16_t* row = xb + t * 2 * pairs;
      KVSLIM_ISA_NS::convert_from_f32(x + (t0 + t) * ldx, DType::BF16, row, k);
      if (k % 2 != 0) row[k] = 0;
      rows[t] = reinterpret_cast<const float*>(row);
    }
    pack_token_columns(rows, mt, pairs, kKC / 2, reinterpret_cast<float*>(dst), slice_stride);
  }

  // Rows [r0, r0 + kNR) x columns [k0, k0 + kc) as dst[(p * kNR + j) * 2 + {0, 1}] =
  // w[r0 + j][k0 + 2 p + {0, 1}]; missing rows and columns are 0. A row's 16 pairs are one
  // 512-bit load, and 16 rows' loads transposed as 32-bit words give 16 vectors of 16 rows' pair p.
  static void pack_w(const WeightView& w, int64_t r0, int64_t k0, int64_t kc, uint16_t* dst, float* tmp) {
    const int nr = static_cast<int>(std::min<int64_t>(kNR, w.rows - r0));
    const PanelRows src = panel_rows(w, r0, nr, k0, kc, tmp);
    const int64_t pairs = (kc + 1) / 2;
    for (int64_t p0 = 0; p0 < pairs; p0 += 16) {
      const int64_t vals = std::min<int64_t>(32, kc - 2 * p0);
      const __mmask32 m = vals == 32 ? ~__mmask32{0} : static_cast<__mmask32>((uint64_t{1} << vals) - 1);
      const int np = static_cast<int>(std::min<int64_t>(16, pairs - p0));
      for (int half = 0; half < kNR / 16; ++half) {
        __m512 v[16];
        for (int i = 0; i < 16; ++i) {
          const int j = 16 * half + i;
          v[i] = j < nr ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(
                              m, reinterpret_cast<const uint16_t*>(src.rows[j]) + src.base + 2 * p0))
                        : _mm512_setzero_ps();
        }
        detail::transpose16x16_ps(v);
        for (int c = 0; c < np; ++c) _mm512_storeu_ps(dst + ((p0 + c) * kNR + 16 * half) * 2, v[c]);
      }
    }
  }

  static void kernel(const uint32_t* xp, const uint16_t* wp, int64_t kc, float* c, bool first) {
    __m512 acc[kMR][2];
#pragma GCC unroll 14
    for (int t = 0; t < kMR; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
    const int64_t pairs = (kc + 1) / 2;
    for (int64_t p = 0; p < pairs; ++p) {
      const __m512bh w0 = (__m512bh)_mm512_loadu_si512(wp + p * 2 * kNR);
      const __m512bh w1 = (__m512bh)_mm512_loadu_si512(wp + p * 2 * kNR + 32);
      const uint32_t* xk = xp + p * kMR;
#pragma GCC unroll 14
      for (int t = 0; t < kMR; ++t) {
        const __m512bh xb = (__m512bh)_mm512_set1_epi32(static_cast<int>(xk[t]));
        acc[t][0] = _mm512_dpbf16_ps(acc[t][0], xb, w0);
        acc[t][1] = _mm512_dpbf16_ps(acc[t][1], xb, w1);
      }
    }
    store_acc(acc, c, first);
  }
};
#endif

// Writes (or adds, when accumulating) a finished tile of gemm_panels' buffer, token panel xpi and
// weight rows [r0, r0 + kNR), to y; the tile's padding is left out.
void store_tile(const float* tile, int64_t xpi, int64_t r0, const detail::GemmOperands& op, int64_t rows) {
  const int64_t t0 = xpi * kMR;
  const int mt = static_cast<int>(std::min<int64_t>(kMR, op.n - t0));
  const int nr = static_cast<int>(std::min<int64_t>(kNR, rows - r0));
  for (int t = 0; t < mt; ++t) {
    float* yt = op.y + (t0 + t) * op.ldy + r0;
    const float* ct = tile + t * kNR;
    if (op.accumulate) {
      for (int j = 0; j < nr; ++j) yt[j] += ct[j];
    } else if (nr == kNR) {
      std::memcpy(yt, ct, sizeof(float) * kNR);  // a constant size: a few vector moves, not a call
    } else {
      std::copy_n(ct, nr, yt);
    }
  }
}

// One product of gemm_panels: its weight and where its outputs go (y, rows ldy apart, written or
// added to). All the products of one call multiply the same x.
struct GemmTarget {
  WeightView w;
  float* y;
  int64_t ldy;
  bool accumulate;
};

// Weight panels [p0, p1) of target `target`, claimed by one thread.
struct PanelChunk {
  int target;
  int64_t p0, p1;
};

// Splits every target's weight panels into chunks, in order: up to max_chunk panels (an L2-sized
// block, see gemm_panels), shrinking to a (4 * threads)-th of the panels still to hand out, so
// that the threads finish within a small chunk of each other (equal chunks left one thread idle
// for up to a whole chunk at the end of each product: 94% scaling from 1 to 2 threads on the
// 2048 x 2048 projections). A chunk never spans two targets.
std::vector<PanelChunk> chunk_panels(std::span<const GemmTarget> targets, int threads, int64_t max_chunk) {
  int64_t left = 0;
  for (const GemmTarget& t : targets) left += (t.w.rows + kNR - 1) / kNR;
  std::vector<PanelChunk> chunks;
  for (int i = 0; i < static_cast<int>(targets.size()); ++i) {
    const int64_t panels = (targets[size_t(i)].w.rows + kNR - 1) / kNR;
    for (int64_t p0 = 0; p0 < panels;) {
      const int64_t size = std::clamp<int64_t>(left / (4 * threads), 1, max_chunk);
      const int64_t p1 = std::min(panels, p0 + size);
      chunks.push_back({i, p0, p1});
      left -= p1 - p0;
      p0 = p1;
    }
  }
  return chunks;
}

// The blocked GEMM over a panel format P (F32Panels, F32TransposedPanels or Bf16Panels): y_i =
// x W_i^T for every target i, on the pool's threads, or on the calling thread alone when pool is
// null. The targets share x, packed once, and one queue of weight panels; they have the same
// type and number of columns.
template <class P>
void gemm_panels(std::span<const GemmTarget> targets, const float* x, int64_t ldx, int64_t n, ThreadPool* pool) {
  const WeightView& w0 = targets[0].w;
  const int64_t k = w0.cols;
  const int64_t n_xpanels = (n + kMR - 1) / kMR;
  int64_t all_rows = 0;
  for (const GemmTarget& t : targets) all_rows += t.w.rows;
  using XElem = typename P::XElem;
  using WElem = typename P::WElem;
  // Packed x is slice-major: [K slice][token panel][one panel's slice], so that the token panels
  // a K slice runs over lie in one contiguous block, streamed in order (a panel-major layout put
  // them a whole panel's row apart, 192 KiB for the FFN's down projection at the AVX2 level).
  const int64_t n_slices = (k + kKC - 1) / kKC;
  const int64_t x_slice = P::x_slice_elems(kKC);              // elements of one token panel's slice
  const int64_t x_slice_stride = n_xpanels * x_slice;         // from one K slice to the next
  constexpr size_t kWPanel = static_cast<size_t>(kNR) * kKC;  // elements of one weight panel's K slice

  thread_local detail::Scratch x_scratch;
  auto* xp = static_cast<XElem*>(x_scratch.get(static_cast<size_t>(n_slices * x_slice_stride) * sizeof(XElem)));

  const int threads = pool != nullptr ? pool->size() : 1;
  const bool parallel = threads > 1 && static_cast<double>(n) * all_rows * k > 2e6;
  auto pack = [&](int t, int nt) {
    for (int64_t p = n_xpanels * t / nt; p < n_xpanels * (t + 1) / nt; ++p)
      P::pack_x(x, ldx, n, k, p * kMR, xp + p * x_slice, x_slice_stride, w0.type);
  };
  // Weight panels go out in chunks of up to kChunk (chunk_panels). A thread converts a whole
  // chunk's K slice (at most kChunk panels, an L2-sized block), then runs every token panel
  // against all of it: each token panel's slice is read from memory once per chunk and reused
  // from L1 by the chunk's panels, rather than once per weight panel (with 512 tokens the packed
  // x of one K slice is 512 KiB, more than a Zen 3 L2 holds). A chunk is 128 weight rows at every
  // level: 4 panels of 32 at AVX-512, 8 of 16 at AVX2 (4 of 16 left the AVX2 FFN down
  // projection, 2048 x 8192, 6-9% slower on a Zen 5 VM).
  constexpr int64_t kChunk = 128 / kNR;
  const std::vector<PanelChunk> chunks = chunk_panels(targets, parallel ? threads : 1, kChunk);
  const auto n_chunks = static_cast<int64_t>(chunks.size());
  detail::ChunkQueue queue(n_chunks, 1);
  auto compute = [&](int, int) {
    thread_local detail::Scratch w_scratch;
    // The chunk's weight panels, then kWPanel floats for panel_rows' copies of a panel's rows.
    auto* wbuf = static_cast<WElem*>(w_scratch.get(kChunk * kWPanel * sizeof(WElem) + kWPanel * sizeof(float) + 64));
    auto* tmp = reinterpret_cast<float*>(wbuf + kChunk * kWPanel);
    // The chunk's outputs are summed over the K slices in a contiguous buffer of whole tiles,
    // [token panel][weight panel][kMR][kNR], and each goes to y once, in the last slice. Summed in
    // y itself, a tile's rows lie y's row length apart, a multiple of 4 KiB for every model shape:
    // all of them fall in the same L1 set (a 14 x 32 tile is 28 lines for 12 ways) and y's chunk
    // never stays in L2, so each slice's tile update waited on L3 (F16 and BF16 prefill at the
    // AVX-512 levels 3-16% slower, 2026-11-28).
    thread_local detail::Scratch c_scratch;
    constexpr int64_t kTile = static_cast<int64_t>(kMR) * kNR;
    auto* cbuf = static_cast<float*>(c_scratch.get(static_cast<size_t>(n_xpanels * kChunk * kTile) * sizeof(float)));
    // The chunk after this one is claimed while this one's last K slice is computed, so that its
    // first slice can be prefetched like every other slice (the chunk's first slice otherwise
    // waited on DRAM in pack_w).
    int64_t ci = 0, ci_end = 0, ni = 0, ni_end = 0;
    bool have = queue.pop(ci, ci_end);
    while (have) {
      const PanelChunk& chunk = chunks[size_t(ci)];
      const GemmTarget& target = targets[size_t(chunk.target)];
      const WeightView& w = target.w;
      const int64_t p0 = chunk.p0, p1 = chunk.p1;
      const detail::GemmOperands op{x, ldx, n, target.y, target.ldy, target.accumulate};
      bool have_next = false;
      for (int64_t k0 = 0; k0 < k; k0 += kKC) {
        const int64_t kc = std::min(kKC, k - k0);
        for (int64_t p = p0; p < p1; ++p) P::pack_w(w, p * kNR, k0, kc, wbuf + (p - p0) * kWPanel, tmp);
        // While the last token panels of this slice are computed, the next slice's weights (this
        // chunk's next slice, or the next chunk's first) are pulled towards the cache. Not
        // earlier: the token panels stream through L1 and L2 (512 tokens of a slice are 512 KiB
        // of f32) and would evict them again before their use.
        const int64_t next_k0 = k0 + kKC;
        const bool last = next_k0 >= k;
        if (last) have_next = queue.pop(ni, ni_end);
        const PanelChunk& pf = last && have_next ? chunks[size_t(ni)] : chunk;
        const WeightView& pf_w = targets[size_t(pf.target)].w;
        const int64_t pf_r0 = pf.p0 * kNR, pf_r1 = std::min(pf_w.rows, pf.p1 * kNR);
        const int64_t pf_k0 = last ? 0 : next_k0;
        const bool more = P::kPrefetchWeights && (!last || have_next);
        const int64_t window = std::min<int64_t>(n_xpanels, kPrefetchPanels);
        const detail::PanelPrefetcher prefetcher(pf_w, pf_r0, more ? pf_r1 : pf_r0, pf_k0,
                                                 more ? std::min(kKC, k - pf_k0) : 0, window);
        const XElem* x_k0 = xp + k0 / kKC * x_slice_stride;
        // The next token panel's slice is prefetched a part per weight panel: it comes from L3
        // (the packed x of a K slice outgrows L2), and the first weight panel to use it would
        // wait on it (the AVX2 F16 down projection, 2048 x 8192, ran 10% slower than the others).
        const int64_t x_bytes = static_cast<int64_t>(sizeof(XElem)) * x_slice;
        const int64_t x_part = (x_bytes / 64 + (p1 - p0) - 1) / (p1 - p0) * 64;  // bytes per weight panel
        for (int64_t xpi = 0; xpi < n_xpanels; ++xpi) {
          const char* x_next = reinterpret_cast<const char*>(x_k0 + std::min(xpi + 1, n_xpanels - 1) * x_slice);
          for (int64_t p = p0; p < p1; ++p) {
            float* tile = cbuf + (xpi * (p1 - p0) + (p - p0)) * kTile;
            // Its lines are wanted at the end of the k loop: asked for now, they arrive meanwhile.
            for (int64_t line = 0; line < kTile; line += 16) __builtin_prefetch(tile + line, 1, 3);
            const int64_t x_end = std::min(x_bytes, (p - p0 + 1) * x_part);
            for (int64_t b = (p - p0) * x_part; b < x_end; b += 64) __builtin_prefetch(x_next + b, 0, 3);
            P::kernel(x_k0 + xpi * x_slice, wbuf + (p - p0) * kWPanel, kc, tile, k0 == 0);
            // Stored as soon as it is whole, so that the misses of y's rows overlap the next tiles'
            // arithmetic (stored in a pass of their own after the slice, 4% of an F16 prefill).
            if (last) store_tile(tile, xpi, p * kNR, op, w.rows);
          }
          if (xpi >= n_xpanels - window) prefetcher.part(xpi - (n_xpanels - window));
        }
      }
      ci = ni;
      have = have_next;
    }
  };
  if (parallel) {
    pool->run_fn(pack);
    pool->run_fn(compute);
  } else {
    pack(0, 1);
    compute(0, 1);
  }
}

// The blocked GEMM of one product.
template <class P>
void gemm_panels(const WeightView& w, const detail::GemmOperands& op, ThreadPool* pool) {
  const GemmTarget target{w, op.y, op.ldy, op.accumulate};
  gemm_panels<P>(std::span<const GemmTarget>(&target, 1), op.x, op.ldx, op.n, pool);
}

// Where a product of n > 1 tokens with a weight of this type goes (matmul's dispatch).
enum class GemmPath { Int8, AmxBf16, Bf16Dot, F32 };
GemmPath gemm_path(DType type, int64_t n) {
  if (detail::matmul_q8_takes(type)) return GemmPath::Int8;
  // AMX works on 16-token tiles; below one tile the f32 GEMM wastes less.
  if ((type == DType::F16 || type == DType::BF16) && n >= 16 && detail::amx_bf16_usable()) return GemmPath::AmxBf16;
  if (type == DType::BF16 && detail::bf16_dot_gemm_preferred()) return GemmPath::Bf16Dot;
  return GemmPath::F32;
}

// The shape checks of matmul. False when there is nothing to multiply (y is then zeroed as an
// empty sum, or left alone when it has no elements).
bool matmul_shape_ok(const WeightView& w, int64_t n, float* y) {
  if (w.rows < 0 || w.cols < 0 || n < 0) fail("matmul: invalid shape {}x{} with n = {}", w.rows, w.cols, n);
  if (n == 0 || w.rows == 0) return false;
  if (w.cols == 0) {
    std::memset(y, 0, static_cast<size_t>(n) * w.rows * sizeof(float));
    return false;
  }
  if (w.cols % dtype_block_size(w.type) != 0) {
    fail("matmul: {} weight has {} columns, not a multiple of {}", dtype_name(w.type), w.cols,
         dtype_block_size(w.type));
  }
  return true;
}

}  // namespace

void matmul(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  if (!matmul_shape_ok(w, n, y)) return;
  if (n == 1) {
    matvec(w, x, y, pool);
    return;
  }
  switch (gemm_path(w.type, n)) {
    case GemmPath::Int8: return detail::matmul_q8(w, x, n, y, pool);
    case GemmPath::AmxBf16: return detail::matmul_bf16_amx(w, x, n, y, pool);
    case GemmPath::Bf16Dot: return detail::matmul_bf16_dot(w, x, n, y, pool);
    case GemmPath::F32: break;
  }
  gemm_panels<F32Panels>(w, detail::GemmOperands{x, w.cols, n, y, w.rows, false}, &pool);
}

void matmul_multi(std::span<const WeightView> ws, const float* x, int64_t n, std::span<float* const> ys,
                  ThreadPool& pool) {
  if (ws.size() != ys.size()) fail("matmul_multi: {} weights but {} outputs", ws.size(), ys.size());
  if (ws.empty()) return;
  bool shared = n > 1;
  std::vector<GemmTarget> targets;
  for (size_t i = 0; i < ws.size(); ++i) {
    if (!matmul_shape_ok(ws[i], n, ys[i])) {
      shared = false;  // an empty product: the rest go one by one
      continue;
    }
    shared = shared && ws[i].type == ws[0].type && ws[i].cols == ws[0].cols;
    targets.push_back({ws[i], ys[i], ws[i].rows, false});
  }
  // One packing of x and one queue of panels for all the products, where they take the same
  // blocked GEMM; the other paths (and mixed types, as q4_K_M files mix q4_K and q6_K) run one
  // product at a time. Either way each y is matmul's.
  const GemmPath path = shared ? gemm_path(ws[0].type, n) : GemmPath::Int8;
  if (shared && path == GemmPath::F32) return gemm_panels<F32Panels>(targets, x, ws[0].cols, n, &pool);
#if defined(KVSLIM_BF16_DOT)
  if (shared && path == GemmPath::Bf16Dot) return gemm_panels<Bf16Panels>(targets, x, ws[0].cols, n, &pool);
#endif
  for (size_t i = 0; i < ws.size(); ++i) KVSLIM_ISA_NS::matmul(ws[i], x, n, ys[i], pool);
}

namespace detail {

bool bf16_dot_gemm_preferred() {
#if defined(KVSLIM_BF16_DOT) && defined(__x86_64__)
  // On AMD Zen 5 vdpbf16ps on 512 bits issues at the FMA's rate, 2 a cycle (6.4 G/s against
  // vfmadd231ps's 6.7 G/s on one core, 2026-11-28), with twice its products; on Intel it ran at
  // half that: a Sapphire Rapids-class VM multiplied 172-184 GFLOP/s this way against the f32
  // GEMM's 250-268 (2026-11-27).
  static const bool amd = [] {
    __builtin_cpu_init();
    return __builtin_cpu_is("amd") != 0;
  }();
  return amd;
#else
  return false;
#endif
}

void matmul_bf16_dot(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
#if defined(KVSLIM_BF16_DOT)
  if (w.type != DType::BF16) fail("matmul_bf16_dot: {} weights, expected bf16", dtype_name(w.type));
  if (n <= 0 || w.rows == 0 || w.cols == 0) fail("matmul_bf16_dot: empty product {}x{} with n = {}", w.rows, w.cols, n);
  gemm_panels<Bf16Panels>(w, GemmOperands{x, w.cols, n, y, w.rows, false}, &pool);
#else
  fail("matmul_bf16_dot: this level has no AVX512-BF16 dot product");
#endif
}

}  // namespace detail

namespace {
// An empty sum (k = 0): Y is zero, or unchanged when accumulating.
void zero_rows_unless(bool accumulate, float* y, int64_t ldy, int64_t n, int64_t cols) {
  if (accumulate) return;
  for (int64_t t = 0; t < n; ++t) std::fill(y + t * ldy, y + t * ldy + cols, 0.0f);
}
}  // namespace

void gemm_f32_nt(const float* x, int64_t ldx, int64_t n, const float* w, int64_t w_rows, int64_t k, float* y,
                 int64_t ldy, bool accumulate) {
  if (n <= 0 || w_rows <= 0) return;
  if (k <= 0) return zero_rows_unless(accumulate, y, ldy, n, w_rows);
  if (n >= 16 && detail::amx_bf16_usable()) return detail::gemm_f32_nt_amx(x, ldx, n, w, w_rows, k, y, ldy, accumulate);
  gemm_panels<F32Panels>(WeightView{DType::F32, w, w_rows, k}, detail::GemmOperands{x, ldx, n, y, ldy, accumulate},
                         nullptr);
}

void gemm_f32_nn(const float* x, int64_t ldx, int64_t n, const float* w, int64_t k, int64_t w_cols, float* y,
                 int64_t ldy, bool accumulate) {
  if (n <= 0 || w_cols <= 0) return;
  if (k <= 0) return zero_rows_unless(accumulate, y, ldy, n, w_cols);
  if (n >= 16 && detail::amx_bf16_usable()) return detail::gemm_f32_nn_amx(x, ldx, n, w, k, w_cols, y, ldy, accumulate);
  gemm_panels<F32TransposedPanels>(WeightView{DType::F32, w, w_cols, k},
                                   detail::GemmOperands{x, ldx, n, y, ldy, accumulate}, nullptr);
}

namespace {
constexpr const char* kF32Gemm =
#if defined(KVSLIM_HAS_AVX512F)
    "avx512 f32 gemm 14x32";
#elif defined(KVSLIM_HAS_AVX2)
    "avx2 f32 gemm 6x16";
#elif defined(KVSLIM_HAS_NEON)
    "neon f32 gemm 8x12";
#else
    "scalar f32 gemm 4x8";
#endif
}  // namespace

const char* matmul_kernel(DType type) {
  if (detail::matmul_q8_takes(type)) return detail::matmul_q8_kernel(type);
  if (type == DType::BF16 && detail::bf16_dot_gemm_preferred()) return "avx512-bf16 gemm 14x32 (x rounded to bf16)";
  if ((type == DType::F16 || type == DType::BF16) && detail::amx_bf16_usable()) {
    return type == DType::F16 ? "amx bf16 gemm, 5 exact terms (avx512 f32 gemm 14x32 below 16 tokens)"
                              : "amx bf16 gemm, 3 exact terms (avx512 f32 gemm 14x32 below 16 tokens)";
  }
  return kF32Gemm;
}

const char* attention_gemm_kernel() {
  return detail::amx_bf16_usable() ? "amx bf16 gemm, 6 exact terms (avx512 f32 gemm 14x32 below 16 queries)" : kF32Gemm;
}

}  // namespace kvslim::KVSLIM_ISA_NS
