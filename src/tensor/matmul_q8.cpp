// Int8 GEMM for q8_0 weights, the legacy 32-blocks q4_0, q4_1, q5_0, q5_1, the K-quants with
// 32-value sub-blocks q4_K, q5_K and the table types iq4_nl, iq4_xs, mxfp4 (AVX-512 VNNI), and the dispatch between it
// and the AMX-INT8 kernel of matmul_q8_amx.cpp (same int8 values from the shared helpers below, same bits out). At the
// AVX2 level (no VNNI) matmul_q8 runs the maddubs kernel of matmul_q8_avx2.cpp instead, on the same helpers' values,
// again with the same bits out; on aarch64 (dotprod, i8mm) the NEON kernels of matmul_q8_neon.cpp, on NEON bodies of
// the helpers that give the same values. q2_K, q3_K and q6_K, whose 16-value halves have scales (q2_K: and mins) of
// their own, go to matmul_q8_avx2.cpp at every x86 level (its 512-bit form at the AVX-512 levels, AMX or not); the NEON
// kernels sum their halves apart.
//
// The other types are unpacked while packing a weight panel into the same int8 form, exactly:
// q4_0 / q5_0 as q - 8 / q - 16 with scale d; q4_1 / q5_1 as q with scale d plus a per-block
// min m; q4_K / q5_K per sub-block as q with scale d * sc_j and min -dmin * m_j; iq4_nl, iq4_xs
// and mxfp4 as their table's int8 level with the block's scale (mxfp4: the halved E8M0 scale); q2_K /
// q3_K / q6_K (unpack_int8_halves) as level / level - 4 / level - 32 with the super-block's scales and the
// block's halves' own apart (Int8Halves). Mins are
// applied as min * d_x * sum(x_q) (the activation sum is known from the correction term).
//
// X is quantised per token in blocks of 32 (float scale d = amax/127, q = round(x/d)) and
// packed in panels of kMR tokens: per block, [quad][token][4 bytes], then the kMR scales and
// the kMR corrections -128 * sum(q). Threads take chunks of kNR-row weight panels from a
// queue; per kKB-block slice a thread repacks a panel as [block][quad][row][4 bytes] with the
// sign bit flipped (w + 128 as unsigned bytes) plus f32 scales [block][row]. The kernel feeds VNNI
// dpbusd(u8 w + 128, s8 x broadcast) starting each block's int32 accumulators at the
// correction, so after 8 quads they hold sum(w * x) exactly; they are then scaled by
// d_w * d_x and accumulated in f32.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/kernels.h"
#include "tensor/matmul_internal.h"
#include "tensor/ops.h"
#include "tensor/tensor_isa.h"
#include "util/error.h"

#include "tensor/isa_begin.h"
#include "tensor/simd.h"
#include "tensor/int8_gemm_driver.h"

#if defined(KVSLIM_HAS_AVX512F) && defined(KVSLIM_HAS_AVX512BW) && defined(KVSLIM_HAS_AVX512VL) && \
    defined(KVSLIM_HAS_AVX512VNNI)
#define KVSLIM_Q8_GEMM 1
#elif defined(KVSLIM_HAS_AVX2) && defined(KVSLIM_HAS_FMA)
// AVX2 without VNNI: the maddubs kernel of matmul_q8_avx2.cpp, on the int8 values below.
#define KVSLIM_Q8_GEMM_AVX2 1
#elif defined(KVSLIM_HAS_NEON)
// aarch64 (sdot at dotprod, smmla at i8mm, widening multiplies below): matmul_q8_neon.cpp's
// kernels, on the same int8 values as the x86 kernels (the NEON bodies below).
#define KVSLIM_Q8_GEMM_NEON 1
#endif

namespace kvslim::KVSLIM_ISA_NS::detail {

#if defined(KVSLIM_Q8_GEMM) || defined(KVSLIM_Q8_GEMM_AVX2) || defined(KVSLIM_Q8_GEMM_NEON)

namespace {
// Block `b` (a 32-value sub-block) of a q4_K / q5_K row: its super-block, its index j in it, the
// 16 or 32 bytes holding its nibbles, and value = scale * level + min. Portable: the x86 and NEON
// bodies of unpack_int8_block differ only in how they extract the levels.
struct KSubBlock {
  const uint8_t* blk;
  int j;
  const uint8_t* qs;
  float scale, min;
};
KSubBlock k_sub_block(DType type, const uint8_t* row, int64_t b) {
  KSubBlock k;
  k.blk = row + (b / 8) * dtype_block_bytes(type);
  k.j = static_cast<int>(b % 8);
  int sc, m;
  k4_scale_min(k.blk + 4, k.j, sc, m);
  uint16_t h;
  std::memcpy(&h, k.blk, 2);
  k.scale = fp16_to_fp32(h) * static_cast<float>(sc);
  std::memcpy(&h, k.blk + 2, 2);
  k.min = -fp16_to_fp32(h) * static_cast<float>(m);
  k.qs = k.blk + (type == DType::Q5_K ? 48 : 16) + 32 * (k.j / 2);
  return k;
}

// The scales of 32-value block j of a q2_K / q3_K / q6_K super-block (portable: both bodies of
// unpack_int8_halves differ only in how they extract the levels).
void q2k_halves(const BlockQ2_K& blk, int j, Int8Halves& s) {
  s.d = fp16_to_fp32(blk.d);
  s.dmin = fp16_to_fp32(blk.dmin);
  for (int h = 0; h < 2; ++h) {
    s.sub[h] = static_cast<int8_t>(blk.scales[2 * j + h] & 0xF);
    s.min[h] = static_cast<int8_t>(blk.scales[2 * j + h] >> 4);
  }
}
void q3k_halves(const BlockQ3_K& blk, int j, Int8Halves& s) {
  s.d = fp16_to_fp32(blk.d);
  for (int h = 0; h < 2; ++h) s.sub[h] = static_cast<int8_t>(q3k_scale(blk.scales, 2 * j + h) - 32);
}
void q6k_halves(const BlockQ6_K& blk, int j, Int8Halves& s) {
  s.d = fp16_to_fp32(blk.d);
  for (int h = 0; h < 2; ++h) s.sub[h] = blk.scales[2 * j + h];
}

// The types whose nibbles index a 16-entry int8 level table: iq4_nl, iq4_xs and mxfp4.
bool is_table4(DType type) { return type == DType::IQ4_NL || type == DType::IQ4_XS || type == DType::MXFP4; }

// Block `b` of an iq4_nl / iq4_xs / mxfp4 row: the 16 bytes of its nibbles, its scale and the
// type's level table.
const uint8_t* table4_block(DType type, const uint8_t* row, int64_t b, float& scale, const int8_t*& levels) {
  if (type == DType::MXFP4) {
    const uint8_t* blk = row + b * dtype_block_bytes(type);
    scale = e8m0_to_fp32_half(blk[0]);
    levels = kMXFP4Levels;
    return blk + 1;
  }
  levels = kIQ4Levels;
  const bool xs = type == DType::IQ4_XS;
  const uint8_t* blk = row + (xs ? b / 8 : b) * dtype_block_bytes(type);
  const int j = static_cast<int>(b % 8);
  uint16_t h;
  std::memcpy(&h, blk, 2);
  scale = fp16_to_fp32(h);
  if (xs) scale *= static_cast<float>(iq4xs_scale(*reinterpret_cast<const BlockIQ4_XS*>(blk), j));
  return xs ? blk + 8 + 16 * j : blk + 2;
}

// q4_1, q5_0 and q5_1 blocks (blk) as int8 q and, for q4_1 / q5_1, the min (portable: the same
// code at every level).
void unpack_int8_legacy(DType type, const uint8_t* blk, int8_t* q, float& min) {
  uint16_t h;
  if (type == DType::Q4_1) {
    std::memcpy(&h, blk + 2, 2);
    min = fp16_to_fp32(h);
    for (int i = 0; i < 16; ++i) {
      q[i] = static_cast<int8_t>(blk[4 + i] & 0xF);
      q[i + 16] = static_cast<int8_t>(blk[4 + i] >> 4);
    }
    return;
  }
  // q5_0 / q5_1
  const bool affine = type == DType::Q5_1;
  const uint8_t* qh = blk + (affine ? 4 : 2);
  const uint8_t* qs = qh + 4;
  if (affine) {
    std::memcpy(&h, blk + 2, 2);
    min = fp16_to_fp32(h);
  }
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  const int off = affine ? 0 : 16;
  for (int i = 0; i < 16; ++i) {
    q[i] = static_cast<int8_t>(((qs[i] & 0xF) | (((bits >> i) & 1u) << 4)) - off);
    q[i + 16] = static_cast<int8_t>(((qs[i] >> 4) | (((bits >> (i + 16)) & 1u) << 4)) - off);
  }
}
}  // namespace

#endif

#if defined(KVSLIM_Q8_GEMM) || defined(KVSLIM_Q8_GEMM_AVX2)

// The 32-value block `b` of a row as 32 int8 values q with value = scale * q + min. For q4_K /
// q5_K a block is one 32-value sub-block: scale = d * sc_j, min = -dmin * m_j, q = its level.
void unpack_int8_block(DType type, const uint8_t* row, int64_t b, int8_t* q, float& scale, float& min) {
  uint16_t h;
  min = 0.0f;
  if (type == DType::Q4_K || type == DType::Q5_K) {
    const bool five = type == DType::Q5_K;
    const KSubBlock k = k_sub_block(type, row, b);
    const uint8_t *blk = k.blk, *qs = k.qs;
    const int j = k.j;
    scale = k.scale;
    min = k.min;
    // The 32 levels in one 256-bit register: this sub-block's nibbles, plus bit j of qh as bit 4.
    const __m256i nib = _mm256_set1_epi8(0x0F);
    const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
    __m256i v = (j & 1) ? _mm256_and_si256(_mm256_srli_epi16(bytes, 4), nib) : _mm256_and_si256(bytes, nib);
    if (five) {
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16));
      const __m256i bit = _mm256_and_si256(_mm256_srli_epi16(qh, j), _mm256_set1_epi8(1));
      v = _mm256_or_si256(v, _mm256_slli_epi16(bit, 4));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), v);
    return;
  }
  if (is_table4(type)) {
    // The nibbles of one 32-value (sub-)block looked up in the level table: int8 levels -127..113
    // (iq4), -12..12 (mxfp4).
    const int8_t* levels;
    const uint8_t* nibbles = table4_block(type, row, b, scale, levels);
    const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(levels));
    const __m128i nib = _mm_set1_epi8(0x0F);
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(nibbles));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm_shuffle_epi8(table, _mm_and_si128(bytes, nib)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16),
                     _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(bytes, 4), nib)));
    return;
  }
  const uint8_t* blk = row + b * dtype_block_bytes(type);
  std::memcpy(&h, blk, 2);
  scale = fp16_to_fp32(h);
  switch (type) {
    case DType::Q8_0: std::memcpy(q, blk + 2, 32); return;
    case DType::Q4_0: {
      // Low nibbles are values 0-15, high nibbles 16-31, each stored as level + 8.
      const __m128i nib = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm_sub_epi8(_mm_and_si128(bytes, nib), eight));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16),
                       _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(bytes, 4), nib), eight));
      return;
    }
    default: unpack_int8_legacy(type, blk, q, min); return;
  }
}

// The 32-value block `b` (one of the 8 per super-block) of a q2_K, q3_K or q6_K row as its int8
// values q (the level; level - 4; level - 32) with the super-block's scales and the block's two
// 16-value halves' own (Int8Halves). q2_K: the 2-bit levels are one bit pair of 32 consecutive
// bytes of qs, a half's scale and min the nibbles of its byte of scales. q3_K: the 2 low bits as
// q2_K's, the high bit one bit of hmask's 32 bytes, a half's scale its 6-bit s_j - 32. q6_K: the
// low 4 bits are 32 consecutive bytes of ql (low or high nibbles), the high 2 bits one bit pair of
// 32 consecutive bytes of qh (layouts in quant_blocks.h).
void unpack_int8_halves(DType type, const uint8_t* row, int64_t b, int8_t* q, Int8Halves& s) {
  const int j = static_cast<int>(b % 8), h = j / 4, quarter = j % 4;
  s = Int8Halves{};
  if (type == DType::Q2_K) {
    const auto& blk = reinterpret_cast<const BlockQ2_K*>(row)[b / 8];
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * h));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                        _mm256_and_si256(_mm256_srl_epi16(bits, _mm_cvtsi32_si128(2 * quarter)), _mm256_set1_epi8(3)));
    q2k_halves(blk, j, s);
    return;
  }
  if (type == DType::Q3_K) {
    const auto& blk = reinterpret_cast<const BlockQ3_K*>(row)[b / 8];
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * h));
    const __m256i lo = _mm256_and_si256(_mm256_srl_epi16(bits, _mm_cvtsi32_si128(2 * quarter)), _mm256_set1_epi8(3));
    const __m256i hmask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.hmask));
    const __m256i hi = _mm256_and_si256(_mm256_srl_epi16(hmask, _mm_cvtsi32_si128(j)), _mm256_set1_epi8(1));
    const __m256i level = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 2));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), _mm256_sub_epi8(level, _mm256_set1_epi8(4)));
    q3k_halves(blk, j, s);
    return;
  }
  const auto& blk = reinterpret_cast<const BlockQ6_K*>(row)[b / 8];
  const __m256i nib = _mm256_set1_epi8(0x0F);
  __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.ql + 64 * h + 32 * (quarter & 1)));
  lo = quarter < 2 ? _mm256_and_si256(lo, nib) : _mm256_and_si256(_mm256_srli_epi16(lo, 4), nib);
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * h));
  const __m256i hi = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * quarter)), _mm256_set1_epi8(3));
  const __m256i level = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), _mm256_sub_epi8(level, _mm256_set1_epi8(32)));
  q6k_halves(blk, j, s);
}

#if defined(KVSLIM_Q8_GEMM)
void quantize_x_block(const float* xb, int8_t* q, float& d, int32_t& sum) {
  const __m512 v0 = _mm512_loadu_ps(xb);
  const __m512 v1 = _mm512_loadu_ps(xb + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  d = amax / 127.0f;
  const __m512 vid = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
  const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, vid));
  const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, vid));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtsepi32_epi8(q0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), _mm512_cvtsepi32_epi8(q1));
  sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
}
#else
// The same steps in 256-bit registers (max, the division, the product, round to nearest even
// and the int32 sum are exact or rounded alike): the same q, d and sum as the AVX-512 body.
void quantize_x_block(const float* xb, int8_t* q, float& d, int32_t& sum) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 v[4];
  for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(xb + 8 * i);
  const __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                                 _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
  const float amax = hmax256(m);
  d = amax / 127.0f;
  const __m256 vid = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
  __m256i qi[4];
  for (int i = 0; i < 4; ++i) qi[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], vid));
  // Saturating packs work per 128-bit lane: dword j of the result holds values 4j..4j+3 of
  // qi[j % 4] (j < 4) or values 4..7 of qi[j - 4]; the permutation puts them in order.
  const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                      _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  const __m256i s8 = _mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3]));
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
  sum = _mm_cvtsi128_si32(s4);
}
#endif

#endif  // KVSLIM_Q8_GEMM || KVSLIM_Q8_GEMM_AVX2

#if defined(KVSLIM_Q8_GEMM_NEON)
// The x86 bodies above in NEON registers: the same q, scale and min for every block.
void unpack_int8_block(DType type, const uint8_t* row, int64_t b, int8_t* q, float& scale, float& min) {
  uint16_t h;
  min = 0.0f;
  const uint8x16_t nib = vdupq_n_u8(0x0F);
  if (type == DType::Q4_K || type == DType::Q5_K) {
    const bool five = type == DType::Q5_K;
    const KSubBlock k = k_sub_block(type, row, b);
    const uint8_t *blk = k.blk, *qs = k.qs;
    const int j = k.j;
    scale = k.scale;
    min = k.min;
    // This sub-block's nibbles of 32 bytes, plus bit j of qh as bit 4.
    uint8x16_t v0 = vld1q_u8(qs), v1 = vld1q_u8(qs + 16);
    v0 = (j & 1) ? vshrq_n_u8(v0, 4) : vandq_u8(v0, nib);
    v1 = (j & 1) ? vshrq_n_u8(v1, 4) : vandq_u8(v1, nib);
    if (five) {
      const uint8x16_t bit = vdupq_n_u8(static_cast<uint8_t>(1u << j)), b4 = vdupq_n_u8(0x10);
      v0 = vorrq_u8(v0, vandq_u8(vtstq_u8(vld1q_u8(blk + 16), bit), b4));
      v1 = vorrq_u8(v1, vandq_u8(vtstq_u8(vld1q_u8(blk + 32), bit), b4));
    }
    vst1q_s8(q, vreinterpretq_s8_u8(v0));
    vst1q_s8(q + 16, vreinterpretq_s8_u8(v1));
    return;
  }
  if (is_table4(type)) {
    // The nibbles of one 32-value (sub-)block looked up in the level table: int8 levels -127..113
    // (iq4), -12..12 (mxfp4).
    const int8_t* levels;
    const uint8_t* nibbles = table4_block(type, row, b, scale, levels);
    const int8x16_t table = vld1q_s8(levels);
    const uint8x16_t bytes = vld1q_u8(nibbles);
    vst1q_s8(q, vqtbl1q_s8(table, vandq_u8(bytes, nib)));
    vst1q_s8(q + 16, vqtbl1q_s8(table, vshrq_n_u8(bytes, 4)));
    return;
  }
  const uint8_t* blk = row + b * dtype_block_bytes(type);
  std::memcpy(&h, blk, 2);
  scale = fp16_to_fp32(h);
  switch (type) {
    case DType::Q8_0: std::memcpy(q, blk + 2, 32); return;
    case DType::Q4_0: {
      // Low nibbles are values 0-15, high nibbles 16-31, each stored as level + 8.
      const uint8x16_t bytes = vld1q_u8(blk + 2);
      const int8x16_t eight = vdupq_n_s8(8);
      vst1q_s8(q, vsubq_s8(vreinterpretq_s8_u8(vandq_u8(bytes, nib)), eight));
      vst1q_s8(q + 16, vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(bytes, 4)), eight));
      return;
    }
    default: unpack_int8_legacy(type, blk, q, min); return;
  }
}

// The x86 body's q2_K / q3_K / q6_K block: the same q and scales.
void unpack_int8_halves(DType type, const uint8_t* row, int64_t b, int8_t* q, Int8Halves& s) {
  const int j = static_cast<int>(b % 8), h = j / 4, quarter = j % 4;
  s = Int8Halves{};
  if (type == DType::Q2_K) {
    const auto& blk = reinterpret_cast<const BlockQ2_K*>(row)[b / 8];
    const int8x16_t shift = vdupq_n_s8(static_cast<int8_t>(-2 * quarter));
    for (int i = 0; i < 32; i += 16) {
      vst1q_s8(q + i, vreinterpretq_s8_u8(vandq_u8(vshlq_u8(vld1q_u8(blk.qs + 32 * h + i), shift), vdupq_n_u8(3))));
    }
    q2k_halves(blk, j, s);
    return;
  }
  if (type == DType::Q3_K) {
    const auto& blk = reinterpret_cast<const BlockQ3_K*>(row)[b / 8];
    const int8_t lo_shift = static_cast<int8_t>(-2 * quarter), hi_shift = static_cast<int8_t>(-j);
    for (int i = 0; i < 32; i += 16) {
      const uint8x16_t lo = vandq_u8(vshlq_u8(vld1q_u8(blk.qs + 32 * h + i), vdupq_n_s8(lo_shift)), vdupq_n_u8(3));
      const uint8x16_t hi = vandq_u8(vshlq_u8(vld1q_u8(blk.hmask + i), vdupq_n_s8(hi_shift)), vdupq_n_u8(1));
      const uint8x16_t level = vorrq_u8(lo, vshlq_n_u8(hi, 2));
      vst1q_s8(q + i, vsubq_s8(vreinterpretq_s8_u8(level), vdupq_n_s8(4)));
    }
    q3k_halves(blk, j, s);
    return;
  }
  const auto& blk = reinterpret_cast<const BlockQ6_K*>(row)[b / 8];
  const uint8_t* ql = blk.ql + 64 * h + 32 * (quarter & 1);
  const int8x16_t shift = vdupq_n_s8(static_cast<int8_t>(-2 * quarter));
  for (int i = 0; i < 32; i += 16) {
    uint8x16_t lo = vld1q_u8(ql + i);
    lo = quarter < 2 ? vandq_u8(lo, vdupq_n_u8(0x0F)) : vshrq_n_u8(lo, 4);
    const uint8x16_t hi = vandq_u8(vshlq_u8(vld1q_u8(blk.qh + 32 * h + i), shift), vdupq_n_u8(3));
    const uint8x16_t level = vorrq_u8(lo, vshlq_n_u8(hi, 4));
    vst1q_s8(q + i, vsubq_s8(vreinterpretq_s8_u8(level), vdupq_n_s8(32)));
  }
  q6k_halves(blk, j, s);
}

// The x86 steps (max |x|, d = amax / 127, q = round-to-nearest-even(x * (127 / amax)), the
// int32 sum of q) on 8 vectors of 4: the same q, d and sum.
void quantize_x_block(const float* xb, int8_t* q, float& d, int32_t& sum) {
  float32x4_t v[8];
  for (int i = 0; i < 8; ++i) v[i] = vld1q_f32(xb + 4 * i);
  float32x4_t m = vabsq_f32(v[0]);
  for (int i = 1; i < 8; ++i) m = vmaxq_f32(m, vabsq_f32(v[i]));
  const float amax = vmaxvq_f32(m);
  d = amax / 127.0f;
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  int32x4_t qi[8];
  for (int i = 0; i < 8; ++i) qi[i] = vcvtnq_s32_f32(vmulq_n_f32(v[i], id));
  int16x8_t h16[4];
  for (int i = 0; i < 4; ++i) h16[i] = vcombine_s16(vqmovn_s32(qi[2 * i]), vqmovn_s32(qi[2 * i + 1]));
  vst1q_s8(q, vcombine_s8(vqmovn_s16(h16[0]), vqmovn_s16(h16[1])));
  vst1q_s8(q + 16, vcombine_s8(vqmovn_s16(h16[2]), vqmovn_s16(h16[3])));
  int32x4_t s4 = qi[0];
  for (int i = 1; i < 8; ++i) s4 = vaddq_s32(s4, qi[i]);
  sum = vaddvq_s32(s4);
}
#endif  // KVSLIM_Q8_GEMM_NEON

#if defined(KVSLIM_Q8_GEMM)

namespace {

constexpr int kMR = 6;   // tokens per micro-tile
constexpr int kNRV = 2;  // 16-row vectors per micro-tile
constexpr int kNR = 16 * kNRV;
constexpr int64_t kKB = kInt8SliceBlocks;  // blocks per K slice (512 columns)

// Bytes of one packed X block for a panel: q [8][kMR][4], then scales [kMR], corrections [kMR].
constexpr size_t kXBlockBytes = 8 * kMR * 4 + kMR * 4 + kMR * 4;
// Bytes of one packed W block for a panel: q [8][kNR][4], then scales [kNR], then mins [kNR].
constexpr size_t kWBlockBytes = 8 * kNR * 4 + kNR * 4 + kNR * 4;

void pack_x_panel(const float* x, int64_t n, int64_t k, int64_t t0, uint8_t* dst) {
  const int64_t nb = k / kQ8Block;
  const int mt = static_cast<int>(std::min<int64_t>(kMR, n - t0));
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* blk = dst + b * kXBlockBytes;
    auto* scales = reinterpret_cast<float*>(blk + 8 * kMR * 4);
    auto* corr = reinterpret_cast<int32_t*>(blk + 8 * kMR * 4 + kMR * 4);
    for (int t = 0; t < kMR; ++t) {
      alignas(64) int8_t q[kQ8Block];
      float d = 0.0f;
      int32_t sum = 0;
      if (t < mt) {
        quantize_x_block(x + (t0 + t) * k + b * kQ8Block, q, d, sum);
      } else {
        std::memset(q, 0, sizeof(q));
      }
      scales[t] = d;
      corr[t] = -128 * sum;
      for (int qd = 0; qd < 8; ++qd) std::memcpy(blk + (qd * kMR + t) * 4, q + 4 * qd, 4);
    }
  }
}

// Packs rows [r0, r0 + kNR) x blocks [b0, b0 + nbk) of w; rows past the end get q = 0, d = 0.
void pack_w_panel(const WeightView& w, int64_t r0, int64_t b0, int64_t nbk, uint8_t* dst) {
  const int nr = static_cast<int>(std::min<int64_t>(kNR, w.rows - r0));
  for (int64_t b = 0; b < nbk; ++b) {
    uint8_t* blk = dst + b * kWBlockBytes;
    auto* scales = reinterpret_cast<float*>(blk + 8 * kNR * 4);
    auto* mins = scales + kNR;
    for (int j = 0; j < kNR; ++j) {
      if (j < nr) {
        alignas(32) int8_t q[kQ8Block];
        unpack_int8_block(w.type, w.row(r0 + j), b0 + b, q, scales[j], mins[j]);
        for (int qd = 0; qd < 8; ++qd) {
          uint32_t v;
          std::memcpy(&v, q + 4 * qd, 4);
          v ^= 0x80808080u;
          std::memcpy(blk + (qd * kNR + j) * 4, &v, 4);
        }
      } else {
        scales[j] = 0.0f;
        mins[j] = 0.0f;
        for (int qd = 0; qd < 8; ++qd) std::memset(blk + (qd * kNR + j) * 4, 0x80, 4);
      }
    }
  }
}

template <bool kMins>
void micro_kernel(const uint8_t* xp, const uint8_t* wp, int64_t nbk, float* c, int64_t ldc, int mt, int nr,
                  bool first) {
  __m512 facc[kMR][kNRV];
#pragma GCC unroll 8
  for (int t = 0; t < kMR; ++t) {
#pragma GCC unroll 4
    for (int v = 0; v < kNRV; ++v) facc[t][v] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nbk; ++b) {
    const uint8_t* xb = xp + b * kXBlockBytes;
    const uint8_t* wb = wp + b * kWBlockBytes;
    const auto* xs = reinterpret_cast<const float*>(xb + 8 * kMR * 4);
    const auto* xc = reinterpret_cast<const int32_t*>(xb + 8 * kMR * 4 + kMR * 4);
    const auto* ws = reinterpret_cast<const float*>(wb + 8 * kNR * 4);
    __m512i iacc[kMR][kNRV];
#pragma GCC unroll 8
    for (int t = 0; t < kMR; ++t) {
      const __m512i c0 = _mm512_set1_epi32(xc[t]);
#pragma GCC unroll 4
      for (int v = 0; v < kNRV; ++v) iacc[t][v] = c0;
    }
#pragma GCC unroll 8
    for (int qd = 0; qd < 8; ++qd) {
      __m512i wv[kNRV];
#pragma GCC unroll 4
      for (int v = 0; v < kNRV; ++v) wv[v] = _mm512_load_si512(wb + (qd * kNR + 16 * v) * 4);
      const auto* xq = reinterpret_cast<const int32_t*>(xb + qd * kMR * 4);
#pragma GCC unroll 8
      for (int t = 0; t < kMR; ++t) {
        const __m512i xv = _mm512_set1_epi32(xq[t]);
#pragma GCC unroll 4
        for (int v = 0; v < kNRV; ++v) iacc[t][v] = _mm512_dpbusd_epi32(iacc[t][v], wv[v], xv);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < kMR; ++t) {
      const __m512 sx = _mm512_set1_ps(xs[t]);
#pragma GCC unroll 4
      for (int v = 0; v < kNRV; ++v) {
        const __m512 s = _mm512_mul_ps(_mm512_load_ps(ws + 16 * v), sx);
        facc[t][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc[t][v]), s, facc[t][v]);
      }
      if constexpr (kMins) {
        // + m * d_x * sum(x_q); the correction holds -128 * sum(x_q).
        const __m512 sxs = _mm512_set1_ps(xs[t] * static_cast<float>(xc[t] / -128));
#pragma GCC unroll 4
        for (int v = 0; v < kNRV; ++v) facc[t][v] = _mm512_fmadd_ps(_mm512_load_ps(ws + kNR + 16 * v), sxs, facc[t][v]);
      }
    }
  }
  store_tile_512<kMR, kNRV>(facc, c, ldc, mt, nr, first);
}

}  // namespace

static void matmul_q8_vnni(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  const bool has_mins = int8_has_mins(w.type);
  int8_gemm<kMR, kNR, kXBlockBytes, kWBlockBytes>(
      w, x, n, y, pool, pack_x_panel, pack_w_panel,
      [has_mins](const uint8_t* xp, const uint8_t* wp, int64_t nbk, float* c, int64_t ldc, int mt, int nr, bool first) {
        if (has_mins) {
          micro_kernel<true>(xp, wp, nbk, c, ldc, mt, nr, first);
        } else {
          micro_kernel<false>(xp, wp, nbk, c, ldc, mt, nr, first);
        }
      });
}

bool matmul_q8_available() { return true; }

const char* matmul_q8_kernel(DType type) {
  if (int8_has_halves(type)) return "avx512 int8 gemm (maddubs, 4x32, q2_K / q3_K / q6_K halves)";
  return amx_int8_usable() ? "amx int8 gemm (avx512-vnni below 16 tokens)" : "avx512-vnni int8 gemm 6x32";
}

void matmul_q8(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool, Int8Gemm path) {
  if (path == Int8Gemm::Amx && !amx_int8_usable()) fail("matmul_q8: AMX-INT8 is not usable on this machine");
  if (int8_has_halves(w.type)) return matmul_q8_avx2(w, x, n, y, pool);
  // AMX works on 16-token tiles; below one tile the VNNI kernel's 6-token micro-tiles waste less.
  if (path == Int8Gemm::Amx || (path == Int8Gemm::Auto && n >= 16 && amx_int8_usable())) {
    matmul_q8_amx(w, x, n, y, pool);
  } else {
    matmul_q8_vnni(w, x, n, y, pool);
  }
}

#elif defined(KVSLIM_Q8_GEMM_AVX2)

bool matmul_q8_available() { return true; }

const char* matmul_q8_kernel(DType type) {
#if defined(KVSLIM_HAS_AVX512BW)  // avx512f: the same kernels on zmm
  if (int8_has_halves(type)) return "avx512 int8 gemm (maddubs, 4x32, q2_K / q3_K / q6_K halves)";
  return "avx512 int8 gemm (maddubs, 6x32 / 4x32 for q8_0 and iq4)";
#else
  if (int8_has_halves(type)) return "avx2 int8 gemm (maddubs, 4x16, q2_K / q3_K / q6_K halves)";
#if defined(KVSLIM_HAS_AVXVNNI)
  return "avx-vnni int8 gemm (vpdpbusd, 4x16 / 4x8 for q8_0 and iq4)";
#else
  return "avx2 int8 gemm (maddubs, 4x16 / 4x8 for q8_0 and iq4)";
#endif
#endif
}

// Auto and Vnni (the level's vector kernel) run the AVX2 kernel; there is no AMX here.
void matmul_q8(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool, Int8Gemm path) {
  if (path == Int8Gemm::Amx) fail("matmul_q8: AMX-INT8 is not usable on this machine");
  matmul_q8_avx2(w, x, n, y, pool);
}

#elif defined(KVSLIM_Q8_GEMM_NEON)

bool matmul_q8_available() { return true; }

const char* matmul_q8_kernel(DType type) {
  const bool halves = int8_has_halves(type);  // 4 x 8 tiles at every aarch64 level
#if defined(KVSLIM_HAS_NEON_I8MM)
  return halves ? "neon-i8mm int8 gemm (smmla 4x8, q2_K / q3_K / q6_K halves)" : "neon-i8mm int8 gemm (smmla 4x8)";
#elif defined(KVSLIM_HAS_NEON_DOTPROD)
  return halves ? "neon-dotprod int8 gemm (sdot 4x8, q2_K / q3_K / q6_K halves)" : "neon-dotprod int8 gemm (sdot 4x12)";
#else
  return halves ? "neon int8 gemm (widening multiplies 4x8, q2_K / q3_K / q6_K halves)"
                : "neon int8 gemm (widening multiplies 4x12)";
#endif
}

// Auto and Vnni (the level's vector kernel) run the NEON kernel; there is no AMX here.
void matmul_q8(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool, Int8Gemm path) {
  if (path == Int8Gemm::Amx) fail("matmul_q8: AMX-INT8 is not usable on this machine");
  matmul_q8_neon(w, x, n, y, pool);
}

#else

bool matmul_q8_available() { return false; }

const char* matmul_q8_kernel(DType) { return "none"; }

void matmul_q8(const WeightView&, const float*, int64_t, float*, ThreadPool&, Int8Gemm) {
  fail("matmul_q8: this level has no int8 GEMM (AVX2, AVX-512 VNNI, or aarch64 NEON)");
}

#endif

// Every block type: those with one scale (and at most one min) per 32 values, and q2_K / q3_K /
// q6_K with one per 16 (their kernels sum the two halves of a block apart).
bool matmul_q8_takes(DType type) {
  if (!matmul_q8_available()) return false;
  switch (type) {
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q6_K:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
    case DType::MXFP4: return true;
    default: return false;
  }
}

}  // namespace kvslim::KVSLIM_ISA_NS::detail
