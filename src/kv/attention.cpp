#include "kv/attention.h"

#include <algorithm>
#include <cmath>

#include "kv/attention_isa.h"
#include "tensor/ops.h"
#include "tensor/tensor_isa.h"

#include "tensor/isa_begin.h"
#include "tensor/simd.h"

namespace kvslim::KVSLIM_ISA_NS {

namespace {

// ---- stored row types ----
//
// A codec reads a stored key or value row in its page type: `load(row, c)` gives elements
// [16c, 16c + 16) as f32 in a register (the f32 codec is a plain load: f32 pages add no
// conversion); row_f32 decodes a whole row for the generic path.
// Decoding is exact for f16 and bf16 (every value is a float) and d * q in one rounding for q8_0,
// the numbers dequantize_row_q8_0 gives: the methods' scores (HeadCache::key_f32) read the same.
struct F32Codec {
  static constexpr DType type = DType::F32;
#if defined(KVSLIM_HAS_AVX512F)
  static __m512 load(const uint8_t* row, int c) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + 16 * c);
  }
#endif
};

struct F16Codec {
  static constexpr DType type = DType::F16;
#if defined(KVSLIM_HAS_AVX512F)
  static __m512 load(const uint8_t* row, int c) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32 * c)));
  }
#endif
};

struct Bf16Codec {
  static constexpr DType type = DType::BF16;
#if defined(KVSLIM_HAS_AVX512F)
  // bf16 is the top half of an f32: widen to 32 bits and shift into place.
  static __m512 load(const uint8_t* row, int c) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32 * c)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
#endif
};

struct Q8Codec {
  static constexpr DType type = DType::Q8_0;
#if defined(KVSLIM_HAS_AVX512F)
  // Half a block (16 of its 32 values) times the block's scale.
  static __m512 load(const uint8_t* row, int c) {
    const BlockQ8_0* block = reinterpret_cast<const BlockQ8_0*>(row) + c / 2;
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block->q + 16 * (c % 2)));
    return _mm512_mul_ps(_mm512_set1_ps(fp16_to_fp32(block->scale_f16)), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)));
  }
#endif
};

// Calls f(Codec{}) for the codec of `type`.
template <class F>
void with_codec(DType type, F&& f) {
  switch (type) {
    case DType::F16: return f(F16Codec{});
    case DType::BF16: return f(Bf16Codec{});
    case DType::Q8_0: return f(Q8Codec{});
    default: return f(F32Codec{});
  }
}

// A stored row as f32: f32 rows in place, others decoded into `buffer`.
template <class Codec>
const float* row_f32(const uint8_t* row, int hd, float* buffer) {
  if constexpr (Codec::type == DType::F32) {
    return reinterpret_cast<const float*>(row);
  } else {
    KVSLIM_ISA_NS::convert_to_f32(Codec::type, row, buffer, hd);
    return buffer;
  }
}

// ---- one query per head: the decode kernels ----
//
// `row(j)` gives the j-th stored key (or value) row the kernel reads: consecutive rows of a page
// for dense attention, gathered cache indices for sparse attention. Scores of head g are at
// s[g * s_stride + j]. `buffer` (kDecodeRowBlock * head_dim floats) holds decoded rows.
constexpr int64_t kDecodeRowBlock = 8;

// Generic path (any head_dim, any instruction set): every row is read once for all heads.
template <class Codec, class Row>
void score_rows_generic(const float* q, int hd, int n_heads, Row row, int64_t rows, float scale, float* s,
                        int64_t s_stride, float* buffer) {
  for (int64_t j = 0; j < rows; ++j) {
    const float* k = row_f32<Codec>(row(j), hd, buffer);
    for (int g = 0; g < n_heads; ++g) s[g * s_stride + j] = dot(q + int64_t(g) * hd, k, hd) * scale;
  }
}

template <class Codec, class Row>
void weighted_rows_generic(const float* p, int64_t p_stride, int hd, int n_heads, Row row, int64_t rows, float* out,
                           float* buffer) {
  for (int64_t j = 0; j < rows; ++j) {
    const float* v = row_f32<Codec>(row(j), hd, buffer);
    for (int g = 0; g < n_heads; ++g) axpy(p[g * p_stride + j], v, out + int64_t(g) * hd, hd);
  }
}

#if defined(KVSLIM_HAS_AVX512F)
// [sum(a), sum(b), sum(c), sum(d)]: four horizontal sums sharing their shuffles.
inline __m128 reduce4(__m512 a, __m512 b, __m512 c, __m512 d) {
  // Per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3], likewise for c, d.
  const __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
  const __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
  // Per 128-bit lane: [a, b, c, d] partial sums; then the four lanes are added.
  const __m512d x = _mm512_castps_pd(ab), y = _mm512_castps_pd(cd);
  const __m512 u =
      _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(u), 1));
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(u), hi);
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// head_dim = 16 * CH. Four key rows at a time, read from memory once for all the heads (then
// from L1), their four dot products per head reduced together.
template <int CH, class Codec, class Row>
void score_rows_avx512(const float* q, int n_heads, Row row, int64_t rows, float scale, float* s, int64_t s_stride);

// Other types: each group of four rows is decoded once into an L1-resident f32 block, then scored
// for every head by the f32 kernel (decoding per head would repeat the conversion group times).
template <int CH, class Codec, class Row>
void score_rows_decoded(const float* q, int n_heads, Row row, int64_t rows, float scale, float* s, int64_t s_stride) {
  constexpr int hd = 16 * CH;
  alignas(64) float block[4][hd];
  for (int64_t j0 = 0; j0 < rows; j0 += 4) {
    const int m = int(std::min<int64_t>(4, rows - j0));
    for (int r = 0; r < m; ++r) {
      const uint8_t* src = row(j0 + r);
      for (int c = 0; c < CH; ++c) _mm512_store_ps(block[r] + 16 * c, Codec::load(src, c));
    }
    score_rows_avx512<CH, F32Codec>(
        q, n_heads, [&block](int64_t j) { return reinterpret_cast<const uint8_t*>(block[j]); }, m, scale, s + j0,
        s_stride);
  }
}

template <int CH, class Codec, class Row>
void score_rows_avx512(const float* q, int n_heads, Row row, int64_t rows, float scale, float* s, int64_t s_stride) {
  if constexpr (Codec::type != DType::F32) {
    if (n_heads > 1) return score_rows_decoded<CH, Codec>(q, n_heads, row, rows, scale, s, s_stride);
  }
  constexpr int hd = 16 * CH;
  const __m128 vscale = _mm_set1_ps(scale);
  int64_t j = 0;
  for (; j + 4 <= rows; j += 4) {
    const uint8_t* r0 = row(j);
    const uint8_t* r1 = row(j + 1);
    const uint8_t* r2 = row(j + 2);
    const uint8_t* r3 = row(j + 3);
    for (int g = 0; g < n_heads; ++g) {
      const float* qg = q + g * hd;
      const __m512 q0 = _mm512_loadu_ps(qg);
      __m512 a0 = _mm512_mul_ps(Codec::load(r0, 0), q0), a1 = _mm512_mul_ps(Codec::load(r1, 0), q0);
      __m512 a2 = _mm512_mul_ps(Codec::load(r2, 0), q0), a3 = _mm512_mul_ps(Codec::load(r3, 0), q0);
      for (int c = 1; c < CH; ++c) {
        const __m512 qc = _mm512_loadu_ps(qg + 16 * c);
        a0 = _mm512_fmadd_ps(Codec::load(r0, c), qc, a0);
        a1 = _mm512_fmadd_ps(Codec::load(r1, c), qc, a1);
        a2 = _mm512_fmadd_ps(Codec::load(r2, c), qc, a2);
        a3 = _mm512_fmadd_ps(Codec::load(r3, c), qc, a3);
      }
      _mm_storeu_ps(s + g * s_stride + j, _mm_mul_ps(reduce4(a0, a1, a2, a3), vscale));
    }
  }
  for (; j < rows; ++j) {
    const uint8_t* k = row(j);
    for (int g = 0; g < n_heads; ++g) {
      const float* qg = q + g * hd;
      __m512 acc = _mm512_mul_ps(Codec::load(k, 0), _mm512_loadu_ps(qg));
      for (int c = 1; c < CH; ++c) acc = _mm512_fmadd_ps(Codec::load(k, c), _mm512_loadu_ps(qg + 16 * c), acc);
      s[g * s_stride + j] = _mm512_reduce_add_ps(acc) * scale;
    }
  }
}

// out[g] += sum_j p[g][j] * v_j for GB heads, the accumulators held in registers.
template <int CH, int GB, class Codec, class Row>
void weighted_rows_block(const float* p, int64_t p_stride, Row row, int64_t rows, float* out) {
  constexpr int hd = 16 * CH;
  __m512 acc[GB][CH];
  for (int g = 0; g < GB; ++g)
    for (int c = 0; c < CH; ++c) acc[g][c] = _mm512_loadu_ps(out + g * hd + 16 * c);
  for (int64_t j = 0; j < rows; ++j) {
    const uint8_t* v = row(j);
    __m512 vr[CH];
    for (int c = 0; c < CH; ++c) vr[c] = Codec::load(v, c);
    for (int g = 0; g < GB; ++g) {
      const __m512 pj = _mm512_set1_ps(p[g * p_stride + j]);
      for (int c = 0; c < CH; ++c) acc[g][c] = _mm512_fmadd_ps(pj, vr[c], acc[g][c]);
    }
  }
  for (int g = 0; g < GB; ++g)
    for (int c = 0; c < CH; ++c) _mm512_storeu_ps(out + g * hd + 16 * c, acc[g][c]);
}

// Heads in blocks that keep at most 16 accumulator registers; the rows of a block are re-read
// from cache (a page is at most a few hundred KB) for the next block.
template <int CH, class Codec, class Row>
void weighted_rows_avx512(const float* p, int64_t p_stride, int n_heads, Row row, int64_t rows, float* out) {
  constexpr int hd = 16 * CH;
  constexpr int GB = CH >= 8 ? 2 : CH >= 4 ? 4 : 8;
  int g = 0;
  for (; g + GB <= n_heads; g += GB)
    weighted_rows_block<CH, GB, Codec>(p + g * p_stride, p_stride, row, rows, out + g * hd);
  if constexpr (GB > 2) {
    for (; g + GB / 2 <= n_heads; g += GB / 2)
      weighted_rows_block<CH, GB / 2, Codec>(p + g * p_stride, p_stride, row, rows, out + g * hd);
  }
  for (; g < n_heads; ++g) weighted_rows_block<CH, 1, Codec>(p + g * p_stride, p_stride, row, rows, out + g * hd);
}
#endif

#if (defined(KVSLIM_HAS_AVX2) && !defined(KVSLIM_HAS_AVX512F)) || defined(KVSLIM_HAS_NEON)
// Row blocks (AVX2 and NEON), head_dim a multiple of the vector width: each row is decoded once
// into an L1-resident f32 row (exactly the numbers row_f32 gives), then scored against / added
// into every head of the group with inlined vector loops. The generic path's per-head calls to
// dot() and axpy() cost more than the arithmetic at head_dim 64.
#define KVSLIM_ATTENTION_ROW_BLOCKS 1

// The vector operations those loops use, on 8 floats (AVX2) or 4 (NEON).
struct Lanes {
#if defined(KVSLIM_HAS_AVX2)
  using V = __m256;
  static constexpr int kWidth = 8;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V set1(float a) { return _mm256_set1_ps(a); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }  // a * b + c
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static float sum(V v) { return detail::hsum256(v); }
  // s[r] = scale * (the sum of a[r]'s lanes), r < 8.
  static void store_sums8(const V* a, float scale, float* s) {
    // hadd twice leaves, per 128-bit lane, [a0, a1, a2, a3] (u0) and [a4 .. a7] (u1) half-sums.
    const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    const __m256 sums = _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
    _mm256_storeu_ps(s, _mm256_mul_ps(sums, _mm256_set1_ps(scale)));
  }
  // Elements [i, i + 8) of a stored row as f32.
  static V load_f16(const uint8_t* row, int i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
  }
  static V load_bf16(const uint8_t* row, int i) {  // the top half of an f32: widen and shift
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static V load_q8(const int8_t* q, float d) {
    return _mm256_mul_ps(
        _mm256_set1_ps(d),
        _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q)))));
  }
#else
  using V = float32x4_t;
  static constexpr int kWidth = 4;
  static V load(const float* p) { return vld1q_f32(p); }
  static void store(float* p, V v) { vst1q_f32(p, v); }
  static V set1(float a) { return vdupq_n_f32(a); }
  static V mul(V a, V b) { return vmulq_f32(a, b); }
  static V fma(V a, V b, V c) { return vfmaq_f32(c, a, b); }  // a * b + c
  static V add(V a, V b) { return vaddq_f32(a, b); }
  static float sum(V v) { return vaddvq_f32(v); }
  static void store_sums8(const V* a, float scale, float* s) {
    // Pairwise adds twice: [sum a0, sum a1, sum a2, sum a3], then the same for a4..a7.
    const V lo = vpaddq_f32(vpaddq_f32(a[0], a[1]), vpaddq_f32(a[2], a[3]));
    const V hi = vpaddq_f32(vpaddq_f32(a[4], a[5]), vpaddq_f32(a[6], a[7]));
    vst1q_f32(s, vmulq_n_f32(lo, scale));
    vst1q_f32(s + 4, vmulq_n_f32(hi, scale));
  }
  static V load_f16(const uint8_t* row, int i) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(row) + i)));
  }
  static V load_bf16(const uint8_t* row, int i) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(reinterpret_cast<const uint16_t*>(row) + i), 16));
  }
  static V load_q8(const int8_t* q, float d) {
    // 4 levels widened to int32 (the low half of a sign-extended 8-byte load).
    return vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(vmovl_s8(vld1_s8(q))))), d);
  }
#endif
};
using LaneV = Lanes::V;
constexpr int kLanes = Lanes::kWidth;

// Decodes a stored row into `buffer` (f32 rows are read in place). HD > 0 fixes head_dim at
// compile time (the common sizes, see score_rows): the loops over a row unroll, where a run-time
// head_dim left a counted loop of eight vectors around every conversion and dot product.
template <int HD, class Codec>
inline const float* row_f32_inline(const uint8_t* row, int hd_arg, float* buffer) {
  const int hd = HD > 0 ? HD : hd_arg;
  if constexpr (Codec::type == DType::F32) {
    return reinterpret_cast<const float*>(row);
  } else {
#pragma GCC unroll 16
    for (int i = 0; i < hd; i += kLanes) {
      LaneV v;
      if constexpr (Codec::type == DType::F16) {
        v = Lanes::load_f16(row, i);
      } else if constexpr (Codec::type == DType::BF16) {
        v = Lanes::load_bf16(row, i);
      } else {  // q8_0: d * q, one rounding, as dequantize_row_q8_0
        const BlockQ8_0* block = reinterpret_cast<const BlockQ8_0*>(row) + i / kQ8Block;
        v = Lanes::load_q8(block->q + i % kQ8Block, fp16_to_fp32(block->scale_f16));
      }
      Lanes::store(buffer + i, v);
    }
    return buffer;
  }
}

// Rows are taken eight at a time (decoded into `buffer`, 8 * hd floats): per head, eight dot
// products share each load of the query and end in one transposing reduction and one store of
// eight scores, instead of a horizontal sum per score. HD as for row_f32_inline.
template <int HD, class Codec, class Row>
void score_rows_blocks(const float* q, int hd_arg, int n_heads, Row row, int64_t rows, float scale, float* s,
                       int64_t s_stride, float* buffer) {
  const int hd = HD > 0 ? HD : hd_arg;
  int64_t j = 0;
  for (; j + 8 <= rows; j += 8) {
    const float* k[8];
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) k[r] = row_f32_inline<HD, Codec>(row(j + r), hd, buffer + r * hd);
    for (int g = 0; g < n_heads; ++g) {
      const float* qg = q + int64_t(g) * hd;
      LaneV acc[8];
      LaneV qv = Lanes::load(qg);
#pragma GCC unroll 8
      for (int r = 0; r < 8; ++r) acc[r] = Lanes::mul(qv, Lanes::load(k[r]));
#pragma GCC unroll 16
      for (int i = kLanes; i < hd; i += kLanes) {
        qv = Lanes::load(qg + i);
#pragma GCC unroll 8
        for (int r = 0; r < 8; ++r) acc[r] = Lanes::fma(qv, Lanes::load(k[r] + i), acc[r]);
      }
      Lanes::store_sums8(acc, scale, s + g * s_stride + j);
    }
  }
  for (; j < rows; ++j) {
    const float* k = row_f32_inline<HD, Codec>(row(j), hd, buffer);
    for (int g = 0; g < n_heads; ++g) {
      const float* qg = q + int64_t(g) * hd;
      LaneV acc = Lanes::mul(Lanes::load(qg), Lanes::load(k));
      for (int i = kLanes; i < hd; i += kLanes) acc = Lanes::fma(Lanes::load(qg + i), Lanes::load(k + i), acc);
      s[g * s_stride + j] = Lanes::sum(acc) * scale;
    }
  }
}

// og += sum over the m rows v[r] of pg[r] * v[r]. M > 0 fixes m = M at compile time, so that
// the row loop unrolls and the weights stay in registers: with a run-time m (only the last
// block of a page needs one) they were kept on the stack and read back for every FMA. The rows
// go into two sums (even and odd rows) added at the end: one chain of eight dependent FMAs per
// vector slice waited on the FMA latency.
template <int HD, int M>
inline void add_weighted_block(const float* const* v, int m, const float* pg, int hd_arg, float* og) {
  const int hd = HD > 0 ? HD : hd_arg;
  const int rows = M > 0 ? M : m;
  LaneV pr[8];
#pragma GCC unroll 8
  for (int r = 0; r < rows; ++r) pr[r] = Lanes::set1(pg[r]);
#pragma GCC unroll 16
  for (int i = 0; i < hd; i += kLanes) {
    LaneV even = Lanes::load(og + i);
    if constexpr (M == 8) {
      LaneV odd = Lanes::mul(pr[1], Lanes::load(v[1] + i));
#pragma GCC unroll 4
      for (int r = 0; r < 8; r += 2) {
        even = Lanes::fma(pr[r], Lanes::load(v[r] + i), even);
        if (r > 0) odd = Lanes::fma(pr[r + 1], Lanes::load(v[r + 1] + i), odd);
      }
      even = Lanes::add(even, odd);
    } else {
      for (int r = 0; r < rows; ++r) even = Lanes::fma(pr[r], Lanes::load(v[r] + i), even);
    }
    Lanes::store(og + i, even);
  }
}

// Up to eight rows at a time (decoded into `buffer`, 8 * hd floats): each vector slice of a
// head's output is loaded and stored once per block of rows, not once per row.
template <int HD, class Codec, class Row>
void weighted_rows_blocks(const float* p, int64_t p_stride, int hd_arg, int n_heads, Row row, int64_t rows, float* out,
                          float* buffer) {
  const int hd = HD > 0 ? HD : hd_arg;
  for (int64_t j = 0; j < rows; j += 8) {
    const int m = static_cast<int>(std::min<int64_t>(8, rows - j));
    const float* v[8];
    if (m == 8) {
#pragma GCC unroll 8
      for (int r = 0; r < 8; ++r) v[r] = row_f32_inline<HD, Codec>(row(j + r), hd, buffer + r * hd);
    } else {
      for (int r = 0; r < m; ++r) v[r] = row_f32_inline<HD, Codec>(row(j + r), hd, buffer + r * hd);
    }
    for (int g = 0; g < n_heads; ++g) {
      const float* pg = p + g * p_stride + j;
      float* og = out + int64_t(g) * hd;
      if (m == 8)
        add_weighted_block<HD, 8>(v, m, pg, hd, og);
      else
        add_weighted_block<HD, 0>(v, m, pg, hd, og);
    }
  }
}
#endif

// Dispatch on head_dim: register-resident rows for the common sizes, the generic path otherwise.
template <class Codec, class Row>
void score_rows(const float* q, int hd, int n_heads, Row row, int64_t rows, float scale, float* s, int64_t s_stride,
                float* buffer) {
#if defined(KVSLIM_HAS_AVX512F)
  switch (hd) {
    case 16: return score_rows_avx512<1, Codec>(q, n_heads, row, rows, scale, s, s_stride);
    case 32: return score_rows_avx512<2, Codec>(q, n_heads, row, rows, scale, s, s_stride);
    case 64: return score_rows_avx512<4, Codec>(q, n_heads, row, rows, scale, s, s_stride);
    case 128: return score_rows_avx512<8, Codec>(q, n_heads, row, rows, scale, s, s_stride);
    default: break;
  }
#elif defined(KVSLIM_ATTENTION_ROW_BLOCKS)
  switch (hd) {
    case 64: return score_rows_blocks<64, Codec>(q, hd, n_heads, row, rows, scale, s, s_stride, buffer);
    case 128: return score_rows_blocks<128, Codec>(q, hd, n_heads, row, rows, scale, s, s_stride, buffer);
    default:
      if (hd % kLanes == 0) return score_rows_blocks<0, Codec>(q, hd, n_heads, row, rows, scale, s, s_stride, buffer);
  }
#endif
  score_rows_generic<Codec>(q, hd, n_heads, row, rows, scale, s, s_stride, buffer);
}

template <class Codec, class Row>
void weighted_rows(const float* p, int64_t p_stride, int hd, int n_heads, Row row, int64_t rows, float* out,
                   float* buffer) {
#if defined(KVSLIM_HAS_AVX512F)
  switch (hd) {
    case 16: return weighted_rows_avx512<1, Codec>(p, p_stride, n_heads, row, rows, out);
    case 32: return weighted_rows_avx512<2, Codec>(p, p_stride, n_heads, row, rows, out);
    case 64: return weighted_rows_avx512<4, Codec>(p, p_stride, n_heads, row, rows, out);
    case 128: return weighted_rows_avx512<8, Codec>(p, p_stride, n_heads, row, rows, out);
    default: break;
  }
#elif defined(KVSLIM_ATTENTION_ROW_BLOCKS)
  switch (hd) {
    case 64: return weighted_rows_blocks<64, Codec>(p, p_stride, hd, n_heads, row, rows, out, buffer);
    case 128: return weighted_rows_blocks<128, Codec>(p, p_stride, hd, n_heads, row, rows, out, buffer);
    default:
      if (hd % kLanes == 0) return weighted_rows_blocks<0, Codec>(p, p_stride, hd, n_heads, row, rows, out, buffer);
  }
#endif
  weighted_rows_generic<Codec>(p, p_stride, hd, n_heads, row, rows, out, buffer);
}

// Asks for the cache lines of a stored row of `bytes` bytes ahead of its use, into L1
// (kLocality 3) or L2 (2): each line the row touches once (a 128-byte f16 row on a line
// boundary is two prefetches, where one per 64 bytes plus its last byte made three).
template <int kLocality = 3>
inline void prefetch_row(const uint8_t* row, size_t bytes) {
  const uintptr_t first = reinterpret_cast<uintptr_t>(row) & ~uintptr_t(63);
  const uintptr_t end = reinterpret_cast<uintptr_t>(row) + bytes;
  for (uintptr_t line = first; line < end; line += 64)
    __builtin_prefetch(reinterpret_cast<const void*>(line), 0, kLocality);
}

// The rows of one page for the dense decode kernels. Decode reads a head's pages front to back,
// but each page is an allocation of its own (32 KiB of f16 keys at 256 tokens x head_dim 64), so
// the hardware prefetchers start cold at every page and at every 4 KiB boundary inside one. So
// each row read also asks for the row kDenseAhead bytes further on, in the next page once past
// this one's end, into L2, as the matvecs do for their weights.
constexpr size_t kDenseAhead = 4096;
struct PageRows {
  const uint8_t* rows;  // this page's rows
  const uint8_t* next;  // the next page's rows, or null after the last page
  size_t row_bytes;
  size_t page_bytes;  // a whole page's rows (allocated even where the last page is not full)
  const uint8_t* operator()(int64_t j) const {
    const size_t at = size_t(j) * row_bytes;
    const size_t ahead = at + kDenseAhead;
    if (ahead < page_bytes)
      prefetch_row<2>(rows + ahead, row_bytes);
    else if (next != nullptr && ahead - page_bytes < page_bytes)
      prefetch_row<2>(next + (ahead - page_bytes), row_bytes);
    return rows + at;
  }
};

float* scores_buffer(AttentionScratch& scratch, int64_t n) {
  // The owner sizes the buffer once; growing here only covers a caller that did not.
  if (scratch.scores.size() < size_t(n)) scratch.scores.resize(size_t(n));
  return scratch.scores.data();
}

// Room for `n` decoded floats (a row on the generic decode path, a page of rows in prefill);
// grows on first use only.
float* rows_buffer(AttentionScratch& scratch, int64_t n) {
  if (scratch.rows.size() < size_t(n)) scratch.rows.resize(size_t(n));
  return scratch.rows.data();
}

// Tokens [c0, c0 + m) of a head (c0 a multiple of the page size) as contiguous f32 rows for the
// matrix products, decoded or copied from their pages into `buffer` (m * hd floats): one chunk of
// attention_key_chunk tokens at a time, never the whole cache.
const float* chunk_rows_f32(const std::vector<KvPage*>& pages, bool keys, DType type, int64_t pt, int64_t c0, int64_t m,
                            int hd, float* buffer) {
  for (int64_t p0 = c0; p0 < c0 + m; p0 += pt) {
    const KvPage& page = *pages[size_t(p0 / pt)];
    const uint8_t* rows = keys ? page.keys : page.values;
    const int64_t count = std::min(pt, c0 + m - p0) * hd;
    float* dst = buffer + (p0 - c0) * hd;
    if (type == DType::F32)
      std::copy_n(reinterpret_cast<const float*>(rows), count, dst);
    else
      KVSLIM_ISA_NS::convert_to_f32(type, rows, dst, count);
  }
  return buffer;
}

// Scaled scores of one query per head against every token of the head, page by page (each key
// row read once for all the heads).
void score_all_rows(const PagedKv& kv, const float* q, int n_heads, float scale, float* s, int64_t s_stride,
                    AttentionScratch& scratch) {
  const int hd = kv.head_dim;
  const int64_t pt = kv.page_tokens;
  const int64_t n = kv.head.size();
  const auto& pages = kv.head.pages();
  float* buffer = rows_buffer(scratch, kDecodeRowBlock * hd);
  const size_t kb = row_bytes(kv.head.key_type(), hd);
  with_codec(kv.head.key_type(), [&](auto codec) {
    using Codec = decltype(codec);
    for (int64_t p0 = 0; p0 < n; p0 += pt) {
      const size_t p = size_t(p0 / pt);
      const PageRows keys{pages[p]->keys, p0 + pt < n ? pages[p + 1]->keys : nullptr, kb, size_t(pt) * kb};
      score_rows<Codec>(q, hd, n_heads, keys, std::min(pt, n - p0), scale, s + p0, s_stride, buffer);
    }
  });
}

// One query per head over every token of the head: scores page by page, one softmax per head,
// then the probability-weighted values page by page.
void decode_dense(const PagedKv& kv, const float* q, int n_heads, float* out, AttentionScratch& scratch,
                  SoftmaxRowObserver* observer) {
  const int hd = kv.head_dim;
  const int64_t pt = kv.page_tokens;
  const int64_t n = kv.head.size();
  const auto& pages = kv.head.pages();
  float* s = scores_buffer(scratch, int64_t(n_heads) * n);
  float* buffer = rows_buffer(scratch, kDecodeRowBlock * hd);
  score_all_rows(kv, q, n_heads, 1.0f / std::sqrt(static_cast<float>(hd)), s, n, scratch);
  const int64_t lo = first_visible(kv, kv.head.position(n - 1));
  for (int g = 0; g < n_heads; ++g) {
    std::fill(s + g * n, s + g * n + lo, 0.0f);
    softmax_inplace(s + g * n + lo, n - lo, sink_logit(kv, g));
    if (observer) observer->on_row(g, 0, s + g * n, n);
  }
  std::fill(out, out + int64_t(n_heads) * hd, 0.0f);
  const size_t vb = row_bytes(kv.head.value_type(), hd);
  with_codec(kv.head.value_type(), [&](auto codec) {
    using Codec = decltype(codec);
    for (int64_t p0 = 0; p0 < n; p0 += pt) {
      const size_t p = size_t(p0 / pt);
      const PageRows values{pages[p]->values, p0 + pt < n ? pages[p + 1]->values : nullptr, vb, size_t(pt) * vb};
      weighted_rows<Codec>(s + p0, n, hd, n_heads, values, std::min(pt, n - p0), out, buffer);
    }
  });
}

// A block of queries, a tile of them at a time: scores = Q K^T chunk by chunk into one row per
// query, causal softmax per row, then out = P V accumulated chunk by chunk. A tile holds `tile`
// consecutive queries of every head of the group, stacked query-major (row i * n_heads + g is
// query i of head g), so the heads share each chunk of keys and values, decoded and packed once
// for one larger product, and the tile spans kAttentionQueryTile / n_heads positions: less of
// the causal triangle's masked corner is computed than with one head's 128 queries (a quarter
// more than the triangle at 512 tokens). Chunks of attention_key_chunk tokens (several pages
// gathered as f32 rows) keep each product large. The products run on the engine's own blocked
// GEMM (gemm_f32_nt / _nn, this thread only: the KV heads are already spread over the pool),
// whose AVX-512 micro-kernel measured faster here than the OpenBLAS build's (which picks 256-bit
// AVX2 kernels on this CPU).
void prefill_dense(const PagedKv& kv, const float* q, int64_t q_stride, int n_heads, int64_t n_q, float* out,
                   int64_t out_stride, AttentionScratch& scratch, SoftmaxRowObserver* observer) {
  const int hd = kv.head_dim;
  const int64_t pt = kv.page_tokens;
  const int64_t chunk = attention_key_chunk(kv.page_tokens);
  const int64_t n_before = kv.head.size() - n_q;  // tokens every query sees
  const auto& pages = kv.head.pages();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t tile = std::min(n_q, std::max<int64_t>(1, kAttentionQueryTile / n_heads));
  const int64_t max_rows = tile * n_heads;
  float* s = scores_buffer(scratch, max_rows * kv.head.size());
  if (scratch.queries.size() < size_t(max_rows * hd)) scratch.queries.resize(size_t(max_rows * hd));
  if (scratch.tile_out.size() < size_t(max_rows * hd)) scratch.tile_out.resize(size_t(max_rows * hd));
  float* qs = scratch.queries.data();   // the tile's queries, scaled by 1/sqrt(head_dim)
  float* os = scratch.tile_out.data();  // the tile's outputs, in the same order
  const DType kt = kv.head.key_type(), vt = kv.head.value_type();
  float* chunk_buffer = rows_buffer(scratch, chunk * hd);
  const int64_t group_width = int64_t(n_heads) * hd;  // the group's heads lie side by side in q and out

  for (int64_t t0 = 0; t0 < n_q; t0 += tile) {
    const int64_t positions = std::min(tile, n_q - t0);
    const int64_t rows = positions * n_heads;
    const int64_t cols = n_before + t0 + positions;  // tokens visible to the tile's last query
    for (int64_t i = 0; i < positions; ++i) {
      const float* qi = q + (t0 + i) * q_stride;
      for (int64_t e = 0; e < group_width; ++e) qs[i * group_width + e] = qi[e] * scale;
    }
    for (int64_t c0 = 0; c0 < cols; c0 += chunk) {
      const int64_t m = std::min(chunk, cols - c0);
      const float* keys = chunk_rows_f32(pages, true, kt, pt, c0, m, hd, chunk_buffer);
      gemm_f32_nt(qs, hd, rows, keys, m, hd, s + c0, cols, false);
    }
    for (int64_t i = 0; i < positions; ++i) {
      const int64_t visible = n_before + t0 + i + 1;
      const int64_t lo = first_visible(kv, kv.head.position(visible - 1));
      for (int g = 0; g < n_heads; ++g) {
        float* row = s + (i * n_heads + g) * cols;
        std::fill(row, row + lo, 0.0f);
        softmax_inplace(row + lo, visible - lo, sink_logit(kv, g));
        if (observer) observer->on_row(g, t0 + i, row, visible);
        std::fill(row + visible, row + cols, 0.0f);
      }
    }
    for (int64_t c0 = 0; c0 < cols; c0 += chunk) {
      const int64_t m = std::min(chunk, cols - c0);
      const float* values = chunk_rows_f32(pages, false, vt, pt, c0, m, hd, chunk_buffer);
      gemm_f32_nn(s + c0, cols, rows, values, m, hd, os, hd, c0 != 0);
    }
    for (int64_t i = 0; i < positions; ++i) std::copy_n(os + i * group_width, group_width, out + (t0 + i) * out_stride);
  }
}

}  // namespace

void attend_dense(const PagedKv& kv, const float* q, int64_t q_stride, int n_q_heads, int64_t n_q, float* out,
                  int64_t out_stride, AttentionScratch& scratch, SoftmaxRowObserver* observer) {
  if (n_q < 1 || n_q_heads < 1) return;
  if (n_q == 1)
    decode_dense(kv, q, n_q_heads, out, scratch, observer);
  else
    prefill_dense(kv, q, q_stride, n_q_heads, n_q, out, out_stride, scratch, observer);
}

void attention_scores(const PagedKv& kv, const float* q, int n_q_heads, float* s, int64_t s_stride,
                      AttentionScratch& scratch) {
  if (n_q_heads < 1 || kv.head.size() == 0) return;
  score_all_rows(kv, q, n_q_heads, 1.0f / std::sqrt(static_cast<float>(kv.head_dim)), s, s_stride, scratch);
}

void key_scores(const PagedKv& kv, const float* q, int n_q_heads, float scale, float* s, int64_t s_stride,
                AttentionScratch& scratch) {
  if (n_q_heads < 1 || kv.head.size() == 0) return;
  score_all_rows(kv, q, n_q_heads, scale, s, s_stride, scratch);
}

void attend_sparse(const PagedKv& kv, std::span<const int32_t> indices, const float* q, int n_q_heads, float* out,
                   AttentionScratch& scratch) {
  const int hd = kv.head_dim;
  const int64_t m = int64_t(indices.size());
  std::fill(out, out + int64_t(n_q_heads) * hd, 0.0f);
  if (m == 0 || n_q_heads < 1) return;
  const HeadCache& head = kv.head;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  float* s = scores_buffer(scratch, int64_t(n_q_heads) * m);
  const int32_t* idx = indices.data();
  float* buffer = rows_buffer(scratch, kDecodeRowBlock * hd);
  // The chosen rows are scattered over the head's pages, where the hardware prefetcher (which
  // follows sequential streams) does not see them coming: each row read would wait for memory.
  // Asking for the row kPrefetchAhead places ahead keeps that many misses in flight.
  constexpr int64_t kPrefetchAhead = 16;
  const size_t kb = row_bytes(head.key_type(), hd), vb = row_bytes(head.value_type(), hd);
  with_codec(head.key_type(), [&](auto codec) {
    score_rows<decltype(codec)>(
        q, hd, n_q_heads,
        [&head, idx, m, kb](int64_t j) {
          if (j + kPrefetchAhead < m) prefetch_row(head.key_data(idx[j + kPrefetchAhead]), kb);
          return head.key_data(idx[j]);
        },
        m, scale, s, m, buffer);
  });
  for (int g = 0; g < n_q_heads; ++g) softmax_inplace(s + g * m, m, sink_logit(kv, g));
  with_codec(head.value_type(), [&](auto codec) {
    weighted_rows<decltype(codec)>(
        s, m, hd, n_q_heads,
        [&head, idx, m, vb](int64_t j) {
          if (j + kPrefetchAhead < m) prefetch_row(head.value_data(idx[j + kPrefetchAhead]), vb);
          return head.value_data(idx[j]);
        },
        m, out, buffer);
  });
}

const char* attention_kernel(DType kv_type, int head_dim) {
  (void)kv_type;
#if defined(KVSLIM_HAS_AVX512F)
  if (head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 128) return "avx512 fused rows";
#endif
#if defined(KVSLIM_ATTENTION_ROW_BLOCKS) && defined(KVSLIM_HAS_AVX2)
  if (head_dim % kLanes == 0) return "avx2 rows decoded once, inlined dot / axpy";
#elif defined(KVSLIM_ATTENTION_ROW_BLOCKS)
  if (head_dim % kLanes == 0) return "neon rows decoded once, inlined dot / axpy";
#endif
  (void)head_dim;
  return "rows decoded to f32, then dot / axpy";
}

}  // namespace kvslim::KVSLIM_ISA_NS
