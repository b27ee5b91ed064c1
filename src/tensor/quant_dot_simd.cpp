// AVX2 and VNNI paths of the block types' integer dot products.
//
// Per 32 values, the weight levels are unpacked in registers to 32 unsigned bytes (nibbles
// masked out, 2-bit fields shifted down, high bits OR-ed in from qh / hmask) and multiplied with
// the 32 int8 activations:
//   - legacy types: one int32 vector of sum(q * x) per block, scaled in f32 by d_w * d_x; the
//     offset (-8, -16) or min (m) is applied through the activation block sums;
//   - K-quants: maddubs gives 16 int16 pair sums, which are multiplied by each sub-block's
//     integer scale and summed into int32 with madd (on both paths, see dot_scaled) — the whole
//     super-block stays in exact integers until one f32 multiply by d_w * d_x; mins / offsets
//     come from the q8_K per-16 sums with one madd per super-block.
//   - iq4_nl / iq4_xs / mxfp4: the nibbles index the signed level table with one byte shuffle; since
//     maddubs multiplies unsigned by signed bytes, the levels' magnitudes are multiplied with
//     the activations carrying the levels' signs (pairs at most 2 * 127 * 127, exact).
// The VNNI path uses the 256-bit vpdpbusd (AVX-512 VNNI's EVEX form at the avx512 levels, AVX-VNNI's
// VEX form at the avxvnni level), which fuses the multiply and the accumulation.
// At the avx512 levels, q4_0 (dot_q4_0_512) and q4_K / q5_K / q6_K (dot_k_512) have loops of
// their own on 512-bit vpdpbusd.
// Both paths keep f32 accumulators in vectors and reduce once per row.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "tensor/quant_dot.h"
#include "tensor/tensor_isa.h"
#include "util/error.h"

#include "tensor/isa_begin.h"
#include "tensor/simd.h"

#if defined(KVSLIM_HAS_AVX2) && defined(KVSLIM_HAS_FMA) && defined(KVSLIM_HAS_F16C)
#define KVSLIM_QDOT_AVX2 1
#endif
#if defined(KVSLIM_QDOT_AVX2) && defined(KVSLIM_HAS_DPBUSD256)
#define KVSLIM_QDOT_VNNI 1
#endif
// The 512-bit loops of the AVX-512 VNNI levels: q4_1 / q5_0 / q5_1 (dot_legacy_512) and q4_K /
// q5_K / q6_K (dot_k_512).
#if defined(KVSLIM_QDOT_VNNI) && defined(KVSLIM_HAS_AVX512F) && defined(KVSLIM_HAS_AVX512BW) && \
    defined(KVSLIM_HAS_AVX512VNNI)
#define KVSLIM_QDOT_512 1
#endif

namespace kvslim::KVSLIM_ISA_NS::detail {

// What the typed loops over q4_1, q5_0 and q5_1 (dot_legacy_512 on x86, dot_legacy_neon on
// aarch64) need to know of a block: its layout, whether a fifth bit sits in qh and whether a min m
// is added.
template <DType type>
struct LegacyBlock {
  static_assert(type == DType::Q4_1 || type == DType::Q5_0 || type == DType::Q5_1);
  static constexpr bool kFive = type != DType::Q4_1;
  static constexpr bool kMin = type != DType::Q5_0;
  using Block =
      std::conditional_t<type == DType::Q4_1, BlockQ4_1, std::conditional_t<type == DType::Q5_0, BlockQ5_0, BlockQ5_1>>;
};

#if defined(KVSLIM_QDOT_AVX2)
namespace {

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

// acc + the sum of 4 consecutive u8 * s8 products per int32 lane.
template <bool kVnni>
inline __m256i dot_u8s8(__m256i acc, __m256i w, __m256i x) {
#if defined(KVSLIM_QDOT_VNNI)
  if constexpr (kVnni) return dpbusd256(acc, w, x);
#endif
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1)));
}

// acc + sum over pairs of (u8 * s8 pair sums) * int16 scales. Both paths use madd + add here:
// the fused vpdpwssd measured about 10% slower for q4_k / q5_k matvec on this machine's
// Sapphire Rapids (and no faster for q6_k), so at the avxvnni level the VNNI path differs only
// where vpdpbusd does the whole u8 x s8 product (the legacy types).
template <bool kVnni>
inline __m256i dot_scaled(__m256i acc, __m256i w, __m256i x, __m256i scale16) {
  const __m256i p16 = _mm256_maddubs_epi16(w, x);
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, scale16));
}

// 16 low nibbles then 16 high nibbles of 16 bytes, as 32 bytes.
inline __m256i nibbles32(const uint8_t* qs) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m = _mm_set1_epi8(0x0F);
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(v, m)), _mm_and_si128(_mm_srli_epi16(v, 4), m),
                                 1);
}

// Byte i = 0x10 if bit i of the 32-bit word is set, else 0.
inline __m256i fifth_bits(const uint8_t* qh4) {
  uint32_t h;
  std::memcpy(&h, qh4, 4);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(h)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
}

// A 16-entry int8 level table (kIQ4Levels, kMXFP4Levels) in both 128-bit lanes (the table of a
// byte shuffle).
inline __m256i table_levels(const int8_t* levels) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(levels)));
}
inline __m256i iq4_levels() { return table_levels(kIQ4Levels); }

// `type` is a template argument so that each type's loop is compiled without the switch.
template <bool kVnni, DType type>
float dot_legacy(const uint8_t* row, const QuantActivations& xa, size_t pf) {
  const int64_t nb = xa.n / kQ4Block;
  __m256 accs[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};  // even / odd blocks
  float corr = 0;                                               // the offsets / mins, through the activation sums
  const size_t bb = dtype_block_bytes(type);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + b * bb;
    if ((b & 1) == 0) prefetch_l2(blk, pf);
    const __m256i x = load32(xa.q + b * kQ4Block);
    uint16_t dh;
    std::memcpy(&dh, blk, 2);
    const float dd = h2f(dh) * xa.d[b];
    // The symmetric types' offset (-8 or -16) starts each lane's int32 sum: -offset * (sum of
    // the lane's 4 activations) = lane_corr (-128 * that sum) shifted right by 4 or 3, exactly.
    __m256i w, init = _mm256_setzero_si256();
    switch (type) {
      case DType::Q4_0:
        w = nibbles32(blk + 2);
        init = _mm256_srai_epi32(load32(xa.lane_corr + b * 8), 4);
        break;
      case DType::Q4_1: {
        w = nibbles32(blk + 4);
        uint16_t mh;
        std::memcpy(&mh, blk + 2, 2);
        corr += h2f(mh) * xa.d[b] * static_cast<float>(xa.sum[b]);
        break;
      }
      case DType::Q5_0:
        w = _mm256_or_si256(nibbles32(blk + 6), fifth_bits(blk + 2));
        init = _mm256_srai_epi32(load32(xa.lane_corr + b * 8), 3);
        break;
      default: {  // Q5_1
        w = _mm256_or_si256(nibbles32(blk + 8), fifth_bits(blk + 4));
        uint16_t mh;
        std::memcpy(&mh, blk + 2, 2);
        corr += h2f(mh) * xa.d[b] * static_cast<float>(xa.sum[b]);
        break;
      }
    }
    accs[b & 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_u8s8<kVnni>(init, w, x)), _mm256_set1_ps(dd), accs[b & 1]);
  }
  return hsum256(_mm256_add_ps(accs[0], accs[1])) + corr;
}

// The sum over a row's nb blocks of block(b, acc) (which adds block b's f32 dot product to acc),
// two blocks per step in two accumulators, prefetching pf bytes ahead once per step.
template <class Block, class BlockDot>
inline float sum_block_pairs(const Block* blocks, int64_t nb, size_t pf, BlockDot&& block) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    prefetch_l2(blocks + b, pf);
    acc0 = block(b, acc0);
    acc1 = block(b + 1, acc1);
  }
  if (b < nb) acc0 = block(b, acc0);
  return hsum256(_mm256_add_ps(acc0, acc1));
}

// iq4_nl and mxfp4 (table types: each with its level table and scale): two blocks per step in
// two accumulators, as dot_q4_0_avx2. The levels' magnitudes meet the activations carrying the
// levels' signs. A loop of its own: in dot_legacy's shape (one accumulator picked by the block's
// parity) mxfp4 streamed 8 GB/s on two Zen 3 cores where q4_0's two-block loop streams 17.
template <bool kVnni, DType type>
float dot_table4(const uint8_t* row, const QuantActivations& xa, size_t pf) {
  constexpr bool kMx = type == DType::MXFP4;
  using Block = std::conditional_t<kMx, BlockMXFP4, BlockIQ4_NL>;
  const int64_t nb = xa.n / kQ4Block;
  const auto* blocks = reinterpret_cast<const Block*>(row);
  const __m256i table = table_levels(kMx ? kMXFP4Levels : kIQ4Levels);
  auto block = [&](int64_t b, __m256 acc) {
    const __m256i v = _mm256_shuffle_epi8(table, nibbles32(blocks[b].qs));
    const __m256i x = _mm256_sign_epi8(load32(xa.q + b * kQ4Block), v);
    const __m256i sum = dot_u8s8<kVnni>(_mm256_setzero_si256(), _mm256_abs_epi8(v), x);
    float d;
    if constexpr (kMx) {
      d = e8m0_to_fp32_half(blocks[b].e);
    } else {
      d = h2f(blocks[b].d);
    }
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(d * xa.d[b]), acc);
  };
  return sum_block_pairs(blocks, nb, pf, block);
}

#if defined(KVSLIM_QDOT_512)
// q4_1, q5_0 and q5_1 on the AVX-512 VNNI path, two blocks per 512-bit vpdpbusd: dot_legacy's
// arithmetic with half its instructions, since these loops are bound by instructions, not
// memory (q5_1 decoded at 0.92x llama.cpp on a Zen 5 VM, 2026-11-28). The two blocks' nibble
// bytes are read as one 256-bit pair and spread to [qs0 qs0 qs1 qs1]; the second copy of each is
// shifted right by 4, so each block's 32 bytes are its low nibbles (values 0-15) then its high
// ones (16-31), in the order of its activations. q5's fifth bits are one 64-bit mask over the 64
// bytes: a masked add of 16 to each byte whose bit is set. An odd last block is a pair with an
// empty second block.
template <DType type>
float dot_legacy_512(const uint8_t* row, const QuantActivations& xa, size_t pf) {
  constexpr bool kFive = LegacyBlock<type>::kFive;
  constexpr bool kMin = LegacyBlock<type>::kMin;
  using Block = typename LegacyBlock<type>::Block;
  const int64_t nb = xa.n / kQ4Block;
  const auto* blocks = reinterpret_cast<const Block*>(row);
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  __m512 acc = _mm512_setzero_ps();
  float corr = 0;  // the mins, through the activation sums, as in dot_legacy
  for (int64_t b = 0; b < nb; b += 2) {
    const bool two = b + 1 < nb;
    const Block& b0 = blocks[b];
    const Block& b1 = blocks[two ? b + 1 : b];
    prefetch_l2(&b0, pf);
    const __m128i qs0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b0.qs));
    const __m128i qs1 = two ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(b1.qs)) : _mm_setzero_si128();
    const __m512i pair = _mm512_castsi256_si512(_mm256_set_m128i(qs1, qs0));
    const __m512i spread = _mm512_shuffle_i64x2(pair, pair, _MM_SHUFFLE(1, 1, 0, 0));
    __m512i w = _mm512_and_si512(_mm512_mask_srli_epi16(spread, 0xFF00FF00u, spread, 4), low4);
    if constexpr (kFive) {
      uint32_t h0, h1 = 0;
      std::memcpy(&h0, b0.qh, 4);
      if (two) std::memcpy(&h1, b1.qh, 4);
      w = _mm512_mask_add_epi8(w, h0 | uint64_t{h1} << 32, w, _mm512_set1_epi8(0x10));
    }
    const __mmask16 lanes = two ? 0xFFFF : 0x00FF;
    const __m512i x = _mm512_maskz_loadu_epi32(lanes, xa.q + b * kQ4Block);
    // q5_0's -16 offset starts each lane's sum, as in dot_legacy.
    const __m512i init = type == DType::Q5_0
                             ? _mm512_srai_epi32(_mm512_maskz_loadu_epi32(lanes, xa.lane_corr + b * 8), 3)
                             : _mm512_setzero_si512();
    const float dd0 = h2f(b0.d) * xa.d[b];
    const float dd1 = two ? h2f(b1.d) * xa.d[b + 1] : 0.0f;
    const __m512 scale = _mm512_mask_mov_ps(_mm512_set1_ps(dd0), 0xFF00, _mm512_set1_ps(dd1));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(init, w, x)), scale, acc);
    if constexpr (kMin) {
      corr += h2f(b0.m) * xa.d[b] * static_cast<float>(xa.sum[b]);
      if (two) corr += h2f(b1.m) * xa.d[b + 1] * static_cast<float>(xa.sum[b + 1]);
    }
  }
  return _mm512_reduce_add_ps(acc) + corr;
}
#endif

#if defined(KVSLIM_QDOT_VNNI) && defined(KVSLIM_HAS_AVX512F) && defined(KVSLIM_HAS_AVX512BW) && \
    defined(KVSLIM_HAS_AVX512VBMI)
#define KVSLIM_QDOT_Q4_0_512 1
// Q4_0 on the VNNI path, four blocks per pair of 512-bit vpdpbusd: q4_0 is the legacy type
// people run, and its one-block-per-instruction loop is bound by instructions, not memory. The
// four blocks (72 bytes) are read with two loads; one byte permute gathers their 64 nibble
// bytes, which are unpacked at once into low and high halves that meet the activations in the
// same order (QuantActivations::q4_halves); one word permute and one conversion give the four
// weight scales, spread over the lanes of their blocks. Blocks after the last whole group of 4
// go through dot_legacy's arithmetic.
float dot_q4_0_512(const uint8_t* row, const QuantActivations& xa, size_t pf) {
  constexpr size_t kBytes = sizeof(BlockQ4_0);
  const int64_t nb = xa.n / kQ4Block;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  // The 4 blocks span 72 bytes, read as bytes 0-63 and 8-71. Block j's 16 nibble bytes (bytes
  // 2 + 18 j ..) are picked from the pair with one byte permute (index >= 64: the second load)...
  alignas(64) static const uint8_t kQsIndex[64] = {
      2,   3,   4,   5,   6,   7,   8,   9,   10,  11,  12,  13,  14,  15,  16,  17,    // block 0: bytes 2-17
      20,  21,  22,  23,  24,  25,  26,  27,  28,  29,  30,  31,  32,  33,  34,  35,    // block 1: bytes 20-35
      38,  39,  40,  41,  42,  43,  44,  45,  46,  47,  48,  49,  50,  51,  52,  53,    // block 2: bytes 38-53
      112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127};  // block 3: 56-71
  // ... and block j's fp16 scale (16-bit word 9 j of the first load) is copied to words 4j .. 4j + 3.
  const __m512i scale_words = _mm512_zextsi256_si512(
      _mm256_setr_epi16(0, 0, 0, 0, 9, 9, 9, 9, 18, 18, 18, 18, 27, 27, 27, 27));  // upper words unused
  const __m512i qs_index = _mm512_load_si512(kQsIndex);
  __m512 acc = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4) {
    const uint8_t* g = row + b * kBytes;
    // Into L1, unlike the other loops (prefetch_l2): this loop reads the fewest bytes per
    // instruction, and with t1 it decoded 6% slower (35.7 against 38.0 tok/s, q4_0 1B, 2 threads).
    _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(g) + pf), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(g) + pf + 64), _MM_HINT_T0);
    const __m512i first = _mm512_loadu_si512(g), second = _mm512_loadu_si512(g + 8);
    const __m512i qs = _mm512_permutex2var_epi8(first, qs_index, second);
    const int64_t group = b / 4;
    __m512i isum = _mm512_loadu_si512(xa.q4_init + group * 16);
    isum = _mm512_dpbusd_epi32(isum, _mm512_and_si512(qs, low4), _mm512_loadu_si512(xa.q4_halves + group * 128));
    isum = _mm512_dpbusd_epi32(isum, _mm512_and_si512(_mm512_srli_epi16(qs, 4), low4),
                               _mm512_loadu_si512(xa.q4_halves + group * 128 + 64));
    const __m256i wd = _mm512_castsi512_si256(_mm512_permutexvar_epi16(scale_words, first));
    const __m512 dd = _mm512_mul_ps(_mm512_cvtph_ps(wd), _mm512_loadu_ps(xa.q4_scale + group * 16));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), dd, acc);
  }
  float tail = 0;
  for (; b < nb; ++b) {
    const uint8_t* blk = row + b * kBytes;
    const __m256i init = _mm256_srai_epi32(load32(xa.lane_corr + b * 8), 4);
    const __m256i isum = _mm256_dpbusd_epi32(init, nibbles32(blk + 2), load32(xa.q + b * kQ4Block));
    uint16_t dh;
    std::memcpy(&dh, blk, 2);
    tail += hsum256(_mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(h2f(dh) * xa.d[b])));
  }
  return _mm512_reduce_add_ps(acc) + tail;
}
#endif

// q4_K / q5_K's twelve scale bytes as the 8 scales and the 8 mins, one byte each (in the low
// 8 bytes of sc8 / mn8), computed four at a time in 32-bit words from the layout that
// k4_scale_min (quant_blocks.h) reads one value at a time: bytes 0-3 hold scales 0-3 in their
// low 6 bits, bytes 4-7 mins 0-3; scales / mins 4-7 take their low 4 bits from the nibbles of
// bytes 8-11 and their top 2 bits from the top bits of bytes 0-3 / 4-7.
inline void k4_scales_mins(const uint8_t* scales, __m128i& sc8, __m128i& mn8) {
  uint32_t w0, w1, w2;
  std::memcpy(&w0, scales, 4);
  std::memcpy(&w1, scales + 4, 4);
  std::memcpy(&w2, scales + 8, 4);
  const uint32_t low6 = 0x3F3F3F3Fu, low4 = 0x0F0F0F0Fu, low2 = 0x03030303u;
  const uint32_t sc_lo = w0 & low6, mn_lo = w1 & low6;
  const uint32_t sc_hi = (w2 & low4) | (((w0 >> 6) & low2) << 4);
  const uint32_t mn_hi = ((w2 >> 4) & low4) | (((w1 >> 6) & low2) << 4);
  sc8 = _mm_cvtsi64_si128(static_cast<long long>(uint64_t(sc_lo) | (uint64_t(sc_hi) << 32)));
  mn8 = _mm_cvtsi64_si128(static_cast<long long>(uint64_t(mn_lo) | (uint64_t(mn_hi) << 32)));
}

// Shuffle that spreads int16 scale `s` of a 128-bit lane holding 8 int16 over all 8 int16 of
// the lane (bytes 2s, 2s + 1 repeated).
inline __m128i spread_index(int s) { return _mm_set1_epi16(static_cast<short>((2 * s) | ((2 * s + 1) << 8))); }

// Scale vector for 32 values whose first 16 use int16 scale `a` and next 16 scale `b`, picked
// from `sc` (8 int16 scales broadcast into both 128-bit lanes).
inline __m256i pick_scales(__m256i sc, int a, int b) {
  return _mm256_shuffle_epi8(sc, _mm256_inserti128_si256(_mm256_castsi128_si256(spread_index(a)), spread_index(b), 1));
}

// q3_K's twelve scale bytes as its 16 signed scales s_j - 32, int16, computed four at a time in
// 32-bit words from the layout q3k_scale (quant_blocks.h) reads one value at a time: scale j
// takes its low 4 bits from a nibble of bytes 0-7 (j < 8: low nibble of byte j, else the high
// nibble of byte j - 8) and its top 2 bits from bits 2 (j / 4) of byte 8 + j % 4. (A scalar
// loop through a stack array cost a store-to-load forwarding stall per super-block.)
inline __m256i q3k_scales(const uint8_t* scales) {
  uint32_t w0, w1, w2;
  std::memcpy(&w0, scales, 4);
  std::memcpy(&w1, scales + 4, 4);
  std::memcpy(&w2, scales + 8, 4);
  const uint32_t low4 = 0x0F0F0F0Fu, low2 = 0x03030303u;
  const __m128i words = _mm_setr_epi32(static_cast<int>((w0 & low4) | ((w2 & low2) << 4)),
                                       static_cast<int>((w1 & low4) | (((w2 >> 2) & low2) << 4)),
                                       static_cast<int>(((w0 >> 4) & low4) | (((w2 >> 4) & low2) << 4)),
                                       static_cast<int>(((w1 >> 4) & low4) | (((w2 >> 6) & low2) << 4)));
  return _mm256_sub_epi16(_mm256_cvtepu8_epi16(words), _mm256_set1_epi16(32));
}

template <bool kVnni, DType type>
float dot_k(const uint8_t* row, const QuantActivations& xa, size_t pf) {
  const int64_t nb = xa.n / kQK;
  const size_t bb = dtype_block_bytes(type);
  const __m256i m2 = _mm256_set1_epi8(3), m4 = _mm256_set1_epi8(0x0F), m1 = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  __m256 acc_min = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blkp = row + b * bb;
    for (size_t off = 0; off < bb; off += 64) prefetch_l2(blkp, pf + off);
    const BlockQ8_K& x = xa.k[b];
    const __m256i bsums = load32(x.bsums);
    // Two integer accumulators, alternating between chunks, so the fused multiply-accumulates
    // of consecutive chunks do not wait on each other.
    __m256i is[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    __m256i isum;
    switch (type) {
      case DType::Q2_K: {
        const auto& blk = *reinterpret_cast<const BlockQ2_K*>(blkp);
        // The 16 scales (low nibbles) and mins (high nibbles) widened in registers.
        const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales));
        const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(packed, _mm_set1_epi8(0x0F)));
        const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0x0F)));
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const __m256i v = load32(blk.qs + 32 * h);
          const __m256i s =
              h == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00) : _mm256_permute2x128_si256(sc16, sc16, 0x11);
#pragma GCC unroll 4
          for (int k = 0; k < 4; ++k) {
            const __m256i w = _mm256_and_si256(_mm256_srli_epi16(v, 2 * k), m2);
            is[k & 1] =
                dot_scaled<kVnni>(is[k & 1], w, load32(x.qs + 128 * h + 32 * k), pick_scales(s, 2 * k, 2 * k + 1));
          }
        }
        isum = _mm256_add_epi32(is[0], is[1]);
        const __m256i msum = _mm256_madd_epi16(bsums, mn16);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(x.d * h2f(blk.d)), acc);
        acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(-x.d * h2f(blk.dmin)), acc_min);
        break;
      }
      case DType::Q3_K: {
        const auto& blk = *reinterpret_cast<const BlockQ3_K*>(blkp);
        const __m256i sc16 = q3k_scales(blk.scales);
        const __m256i hm = load32(blk.hmask);
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const __m256i v = load32(blk.qs + 32 * h);
          const __m256i s =
              h == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00) : _mm256_permute2x128_si256(sc16, sc16, 0x11);
#pragma GCC unroll 4
          for (int k = 0; k < 4; ++k) {
            const __m256i high = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + k), m1), 2);
            const __m256i w = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 2 * k), m2), high);
            is[k & 1] =
                dot_scaled<kVnni>(is[k & 1], w, load32(x.qs + 128 * h + 32 * k), pick_scales(s, 2 * k, 2 * k + 1));
          }
        }
        // - 4 * sum_j s_j * bsum_j
        const __m256i off = _mm256_madd_epi16(bsums, sc16);
        isum = _mm256_sub_epi32(_mm256_add_epi32(is[0], is[1]), _mm256_slli_epi32(off, 2));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(x.d * h2f(blk.d)), acc);
        break;
      }
      case DType::Q4_K:
      case DType::Q5_K: {
        const bool five = type == DType::Q5_K;
        const uint8_t* scales = blkp + 4;
        const uint8_t* qs = blkp + (five ? 48 : 16);
        // The 8 six-bit scales and mins, unpacked in registers (a scalar loop through memory
        // cost a store-to-load forwarding stall per super-block).
        __m128i sc8, mn8;
        k4_scales_mins(scales, sc8, mn8);
        const __m256i s = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sc8));
        // Each min twice: one per 16-value activation sum.
        const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn8, mn8));
        const __m256i qh = five ? load32(blkp + 16) : _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int p = 0; p < 4; ++p) {
          const __m256i v = load32(qs + 32 * p);
          __m256i lo = _mm256_and_si256(v, m4);
          __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
          if (five) {
            lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * p), m1), 4));
            hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * p + 1), m1), 4));
          }
          is[0] = dot_scaled<kVnni>(is[0], lo, load32(x.qs + 64 * p), pick_scales(s, 2 * p, 2 * p));
          is[1] = dot_scaled<kVnni>(is[1], hi, load32(x.qs + 64 * p + 32), pick_scales(s, 2 * p + 1, 2 * p + 1));
        }
        isum = _mm256_add_epi32(is[0], is[1]);
        uint16_t dh, mh;
        std::memcpy(&dh, blkp, 2);
        std::memcpy(&mh, blkp + 2, 2);
        const __m256i msum = _mm256_madd_epi16(bsums, mins16);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(x.d * h2f(dh)), acc);
        acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(-x.d * h2f(mh)), acc_min);
        break;
      }
      case DType::IQ4_XS: {
        const auto& blk = *reinterpret_cast<const BlockIQ4_XS*>(blkp);
        const __m256i levels = iq4_levels();
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
          const __m256i v = _mm256_shuffle_epi8(levels, nibbles32(blk.qs + 16 * j));
          const __m256i xs = _mm256_sign_epi8(load32(x.qs + 32 * j), v);
          is[j & 1] = dot_scaled<kVnni>(is[j & 1], _mm256_abs_epi8(v), xs,
                                        _mm256_set1_epi16(static_cast<int16_t>(iq4xs_scale(blk, j))));
        }
        isum = _mm256_add_epi32(is[0], is[1]);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(x.d * h2f(blk.d)), acc);
        break;
      }
      default: {  // Q6_K
        const auto& blk = *reinterpret_cast<const BlockQ6_K*>(blkp);
        // The 16 int8 scales widened in registers (not through a stack array: see q4_K).
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const __m256i l0 = load32(blk.ql + 64 * h);
          const __m256i l1 = load32(blk.ql + 64 * h + 32);
          const __m256i hb = load32(blk.qh + 32 * h);
          const __m256i s =
              h == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00) : _mm256_permute2x128_si256(sc16, sc16, 0x11);
          const __m256i w[4] = {
              _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hb, m2), 4)),
              _mm256_or_si256(_mm256_and_si256(l1, m4),
                              _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m2), 4)),
              _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                              _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m2), 4)),
              _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                              _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m2), 4))};
#pragma GCC unroll 4
          for (int k = 0; k < 4; ++k) {
            is[k & 1] =
                dot_scaled<kVnni>(is[k & 1], w[k], load32(x.qs + 128 * h + 32 * k), pick_scales(s, 2 * k, 2 * k + 1));
          }
        }
        // - 32 * sum_j s_j * bsum_j
        const __m256i off = _mm256_madd_epi16(bsums, sc16);
        isum = _mm256_sub_epi32(_mm256_add_epi32(is[0], is[1]), _mm256_slli_epi32(off, 5));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(x.d * h2f(blk.d)), acc);
        break;
      }
    }
  }
  return hsum256(_mm256_add_ps(acc, acc_min));
}

#if defined(KVSLIM_QDOT_512)
// q4_K, q5_K and q6_K on the AVX-512 VNNI path, 64 values per 512-bit vpdpbusd: dot_k's 256-bit
// loop (maddubs, then madd with the scales, 32 values at a time) is bound by instructions, not
// memory, at this level. Each 64 values are unpacked so that they meet 64 consecutive
// activations: the 32 bytes that hold them are broadcast to both halves of a vector and shifted
// by a different amount in each half (q4_K / q5_K: the low nibbles are one sub-block, the high
// nibbles the next; q6_K: the low or high nibbles of 64 bytes of ql, plus two bits of qh). A
// vpdpbusd lane sums 4 products of at most 63 * 127, so it fits int16, and one vpmaddwd with the
// lane's scale in the low 16 bits (0 above) multiplies it by that scale exactly: the
// super-block's sum stays in exact integers, as in dot_k.

// The 32 bytes at p in both 256-bit halves.
inline __m512i broadcast32(const void* p) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
}

// Lane l of the result is scale (first + l / lanes_per_scale) of `scales` (int32 lanes, the
// scale in the low 16 bits): the scale vector of one vpdpbusd's 16 lanes.
inline __m512i spread_scales(__m512i scales, int first, int lanes_per_scale) {
  alignas(64) int32_t idx[16];
  for (int l = 0; l < 16; ++l) idx[l] = first + l / lanes_per_scale;
  return _mm512_permutexvar_epi32(_mm512_load_si512(idx), scales);
}

template <DType type>
float dot_k_512(const uint8_t* row, const QuantActivations& xa, size_t pf) {
  const int64_t nb = xa.n / kQK;
  const size_t bb = dtype_block_bytes(type);
  const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(3);
  const __m512i low16 = _mm512_set1_epi32(0xFFFF);
  __m512 acc = _mm512_setzero_ps();
  __m256 acc_min = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blkp = row + b * bb;
    for (size_t off = 0; off < bb; off += 64) prefetch_l2(blkp, pf + off);
    const BlockQ8_K& x = xa.k[b];
    // Two integer accumulators, so consecutive multiply-adds do not wait on each other.
    __m512i is0 = _mm512_setzero_si512(), is1 = _mm512_setzero_si512();
    if constexpr (type == DType::Q6_K) {
      const auto& blk = *reinterpret_cast<const BlockQ6_K*>(blkp);
      // The 16 signed scales, one per 16 values (4 lanes), in the low 16 bits of int32 lanes.
      const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
      const __m512i sc32 = _mm512_and_si512(_mm512_cvtepi16_epi32(sc16), low16);
      // Values 128 h + 0..63 take qh bits 0-1 (first 32) and 2-3 (next 32); values 128 h + 64..127
      // bits 4-5 and 6-7.
      const __m512i shift_lo = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2);
      const __m512i shift_hi = _mm512_setr_epi64(4, 4, 4, 4, 6, 6, 6, 6);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m512i l = _mm512_loadu_si512(blk.ql + 64 * h);
        const __m512i hb = broadcast32(blk.qh + 32 * h);
        const __m512i w_lo = _mm512_or_si512(
            _mm512_and_si512(l, m4), _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi64(hb, shift_lo), m2), 4));
        const __m512i w_hi =
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                            _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi64(hb, shift_hi), m2), 4));
        const __m512i d_lo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w_lo, _mm512_loadu_si512(x.qs + 128 * h));
        const __m512i d_hi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w_hi, _mm512_loadu_si512(x.qs + 128 * h + 64));
        is0 = _mm512_add_epi32(is0, _mm512_madd_epi16(d_lo, spread_scales(sc32, 8 * h, 4)));
        is1 = _mm512_add_epi32(is1, _mm512_madd_epi16(d_hi, spread_scales(sc32, 8 * h + 4, 4)));
      }
      // - 32 * sum_j s_j * bsum_j
      const __m256i off = _mm256_madd_epi16(load32(x.bsums), sc16);
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(is0, is1)), _mm512_set1_ps(x.d * h2f(blk.d)), acc);
      acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(off), _mm256_set1_ps(-32.0f * x.d * h2f(blk.d)), acc_min);
    } else {
      constexpr bool kFive = type == DType::Q5_K;
      const uint8_t* qs = blkp + (kFive ? 48 : 16);
      __m128i sc8, mn8;
      k4_scales_mins(blkp + 4, sc8, mn8);
      const __m512i sc32 = _mm512_cvtepu8_epi32(sc8);  // lanes 0-7: the 8 scales, one per 32 values
      // Each min twice: one per 16-value activation sum.
      const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn8, mn8));
      const __m512i nibble_shift = _mm512_setr_epi64(0, 0, 0, 0, 4, 4, 4, 4);
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p) {
        // Values 64 p + 0..31 (sub-block 2 p) are the low nibbles of qs[32 p ..], the next 32
        // (sub-block 2 p + 1) the high nibbles; q5_K's fifth bit of sub-block j is bit j of qh.
        __m512i w = _mm512_and_si512(_mm512_srlv_epi64(broadcast32(qs + 32 * p), nibble_shift), m4);
        if constexpr (kFive) {
          const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (2 * p))),
                                                 _mm256_set1_epi8(static_cast<char>(1 << (2 * p + 1))), 1);
          const __mmask64 high = _mm512_test_epi8_mask(broadcast32(blkp + 16), bit);
          w = _mm512_mask_add_epi8(w, high, w, _mm512_set1_epi8(16));
        }
        const __m512i d = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, _mm512_loadu_si512(x.qs + 64 * p));
        __m512i& is = (p & 1) ? is1 : is0;
        is = _mm512_add_epi32(is, _mm512_madd_epi16(d, spread_scales(sc32, 2 * p, 8)));
      }
      uint16_t dh, mh;
      std::memcpy(&dh, blkp, 2);
      std::memcpy(&mh, blkp + 2, 2);
      const __m256i msum = _mm256_madd_epi16(load32(x.bsums), mins16);
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(is0, is1)), _mm512_set1_ps(x.d * h2f(dh)), acc);
      acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(-x.d * h2f(mh)), acc_min);
    }
  }
  return _mm512_reduce_add_ps(acc) + hsum256(acc_min);
}
#endif

// q4_0 on AVX2 (the most common legacy type gets its own loop: dot_legacy decides the type per
// block): two blocks per step in two accumulators, each block's levels 0..15 times the signed
// activations in maddubs (pairs at most 2 * 15 * 127, exact) or vpdpbusd, the -8 offset started
// in each lane from lane_corr as in dot_legacy.
template <bool kVnni>
float dot_q4_0_avx2(const uint8_t* row, const QuantActivations& xa, size_t pf) {
  const int64_t nb = xa.n / kQ4Block;
  const auto* blocks = reinterpret_cast<const BlockQ4_0*>(row);
  auto block = [&](int64_t b, __m256 acc) {
    const __m256i x = load32(xa.q + b * kQ4Block);
    const __m256i init = _mm256_srai_epi32(load32(xa.lane_corr + b * 8), 4);
    const __m256i sum = dot_u8s8<kVnni>(init, nibbles32(blocks[b].qs), x);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(h2f(blocks[b].d) * xa.d[b]), acc);
  };
  return sum_block_pairs(blocks, nb, pf, block);
}

template <bool kVnni>
void dot_rows(const WeightView& w, const QuantActivations& xa, int64_t r0, int64_t r1, float* y) {
  const size_t pf = block_prefetch_bytes(w.type, w.cols);
#if defined(KVSLIM_QDOT_Q4_0_512)
  if (kVnni && w.type == DType::Q4_0) {
    for (int64_t r = r0; r < r1; ++r) y[r - r0] = dot_q4_0_512(w.row(r), xa, pf);
    return;
  }
#endif
  if (w.type == DType::Q4_0) {
    for (int64_t r = r0; r < r1; ++r) y[r - r0] = dot_q4_0_avx2<kVnni>(w.row(r), xa, pf);
    return;
  }
  auto rows = [&](auto dot) {
    for (int64_t r = r0; r < r1; ++r) y[r - r0] = dot(w.row(r), xa, pf);
  };
#if defined(KVSLIM_QDOT_512)
  if (kVnni) {
    switch (w.type) {
      case DType::Q4_1: return rows(dot_legacy_512<DType::Q4_1>);
      case DType::Q5_0: return rows(dot_legacy_512<DType::Q5_0>);
      case DType::Q5_1: return rows(dot_legacy_512<DType::Q5_1>);
      case DType::Q4_K: return rows(dot_k_512<DType::Q4_K>);
      case DType::Q5_K: return rows(dot_k_512<DType::Q5_K>);
      case DType::Q6_K: return rows(dot_k_512<DType::Q6_K>);
      default: break;
    }
  }
#endif

  switch (w.type) {
    case DType::Q4_0: return rows(dot_legacy<kVnni, DType::Q4_0>);
    case DType::Q4_1: return rows(dot_legacy<kVnni, DType::Q4_1>);
    case DType::Q5_0: return rows(dot_legacy<kVnni, DType::Q5_0>);
    case DType::Q5_1: return rows(dot_legacy<kVnni, DType::Q5_1>);
    case DType::Q2_K: return rows(dot_k<kVnni, DType::Q2_K>);
    case DType::Q3_K: return rows(dot_k<kVnni, DType::Q3_K>);
    case DType::Q4_K: return rows(dot_k<kVnni, DType::Q4_K>);
    case DType::Q5_K: return rows(dot_k<kVnni, DType::Q5_K>);
    case DType::Q6_K: return rows(dot_k<kVnni, DType::Q6_K>);
    case DType::IQ4_NL: return rows(dot_table4<kVnni, DType::IQ4_NL>);
    case DType::MXFP4: return rows(dot_table4<kVnni, DType::MXFP4>);
    case DType::IQ4_XS: return rows(dot_k<kVnni, DType::IQ4_XS>);
    default: fail("no integer dot product for {} weights", dtype_name(w.type));
  }
}

}  // namespace

void quant_dot_rows_avx2(const WeightView& w, const QuantActivations& xa, int64_t r0, int64_t r1, float* y) {
  dot_rows<false>(w, xa, r0, r1, y);
}
#else
void quant_dot_rows_avx2(const WeightView&, const QuantActivations&, int64_t, int64_t, float*) {
  fail("this build has no AVX2 dot-product path");
}
#endif

#if defined(KVSLIM_QDOT_VNNI)
void quant_dot_rows_vnni(const WeightView& w, const QuantActivations& xa, int64_t r0, int64_t r1, float* y) {
  dot_rows<true>(w, xa, r0, r1, y);
}
#else
void quant_dot_rows_vnni(const WeightView&, const QuantActivations&, int64_t, int64_t, float*) {
  fail("this build has no VNNI dot-product path");
}
#endif

#if defined(KVSLIM_HAS_NEON)
// The NEON path (aarch64), every block type: the levels are unpacked in registers to bytes
// (nibbles masked, 2-bit fields shifted down, high bits from qh / hmask tested into place) and
// multiplied with the int8 activations with sdot (dotprod levels) or widening multiplies
// (neon_dot_s8), exact in int32. Both operands are signed here, so where a format's offset is a
// constant (q4_0's 8, q5_0's 16, q3_K's 4, q6_K's 32) it is subtracted from the levels before
// the product (-16 .. 15 still fits a byte), which gives the scalar path's integer s - o * sum(x)
// directly; mins (q4_1, q5_1, q2_K, q4_K, q5_K) go through the activation sums as on x86.
namespace {

inline int32x4_t dot32_neon(int32x4_t acc, int8x16_t w0, int8x16_t w1, const int8_t* x) {
  return neon_dot_s8(neon_dot_s8(acc, w0, vld1q_s8(x)), w1, vld1q_s8(x + 16));
}

// q4_0: the levels minus 8 (-8 .. 7) against the block's activations, scaled by d_w * d_x in
// two f32 accumulators (even and odd blocks).
float dot_q4_0_neon(const uint8_t* row, const QuantActivations& xa, size_t pf) {
  const int64_t nb = xa.n / kQ4Block;
  const auto* blocks = reinterpret_cast<const BlockQ4_0*>(row);
  const uint8x16_t m4 = vdupq_n_u8(0x0F);
  const int8x16_t eight = vdupq_n_s8(8);
  float32x4_t acc[2] = {vdupq_n_f32(0), vdupq_n_f32(0)};
  for (int64_t b = 0; b < nb; ++b) {
    if ((b & 3) == 0)
      __builtin_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(blocks + b) + pf), 0, 3);
    const uint8x16_t v = vld1q_u8(blocks[b].qs);
    const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, m4)), eight);
    const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), eight);
    const int32x4_t d = dot32_neon(vdupq_n_s32(0), lo, hi, xa.q + b * kQ4Block);
    acc[b & 1] = vfmaq_n_f32(acc[b & 1], vcvtq_f32_s32(d), fp16_to_fp32(blocks[b].d) * xa.d[b]);
  }
  return vaddvq_f32(vaddq_f32(acc[0], acc[1]));
}

// iq4: the 32 signed levels of one 32-value (sub-)block from its 16 bytes of nibbles, looked up
// in the level table, dotted with 32 activations.
inline int32x4_t dot_iq4_32_neon(int8x16_t levels, const uint8_t* qs, const int8_t* x) {
  const uint8x16_t v = vld1q_u8(qs);
  const int8x16_t lo = vqtbl1q_s8(levels, vandq_u8(v, vdupq_n_u8(0x0F)));
  const int8x16_t hi = vqtbl1q_s8(levels, vshrq_n_u8(v, 4));
  return dot32_neon(vdupq_n_s32(0), lo, hi, x);
}

// iq4_nl and mxfp4: one table lookup per 32-value block, each type with its table and scale.
template <DType type>
float dot_table4_neon(const uint8_t* row, const QuantActivations& xa, size_t pf) {
  constexpr bool kMx = type == DType::MXFP4;
  using Block = std::conditional_t<kMx, BlockMXFP4, BlockIQ4_NL>;
  const int64_t nb = xa.n / kQ4Block;
  const auto* blocks = reinterpret_cast<const Block*>(row);
  const int8x16_t levels = vld1q_s8(kMx ? kMXFP4Levels : kIQ4Levels);
  float32x4_t acc[2] = {vdupq_n_f32(0), vdupq_n_f32(0)};
  for (int64_t b = 0; b < nb; ++b) {
    if ((b & 3) == 0)
      __builtin_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(blocks + b) + pf), 0, 3);
    const int32x4_t d = dot_iq4_32_neon(levels, blocks[b].qs, xa.q + b * kQ4Block);
    float scale;
    if constexpr (kMx) {
      scale = e8m0_to_fp32_half(blocks[b].e);
    } else {
      scale = fp16_to_fp32(blocks[b].d);
    }
    acc[b & 1] = vfmaq_n_f32(acc[b & 1], vcvtq_f32_s32(d), scale * xa.d[b]);
  }
  return vaddvq_f32(vaddq_f32(acc[0], acc[1]));
}

// iq4_xs: each sub-block's dot product times its signed 6-bit scale, summed in int32.
float dot_iq4_xs_neon(const uint8_t* row, const QuantActivations& xa, size_t pf) {
  const int64_t nb = xa.n / kQK;
  const auto* blocks = reinterpret_cast<const BlockIQ4_XS*>(row);
  const int8x16_t levels = vld1q_s8(kIQ4Levels);
  float acc = 0;
  for (int64_t b = 0; b < nb; ++b) {
    const BlockIQ4_XS& blk = blocks[b];
    const char* ahead = reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(&blk) + pf);
    __builtin_prefetch(ahead, 0, 3);
    __builtin_prefetch(ahead + 64, 0, 3);
    __builtin_prefetch(ahead + 128, 0, 3);
    int32x4_t is[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      is[j & 1] =
          vmlaq_n_s32(is[j & 1], dot_iq4_32_neon(levels, blk.qs + 16 * j, xa.k[b].qs + 32 * j), iq4xs_scale(blk, j));
    }
    acc += xa.k[b].d * fp16_to_fp32(blk.d) * static_cast<float>(vaddvq_s32(vaddq_s32(is[0], is[1])));
  }
  return acc;
}

// Byte i = 0x10 if bit i of the 16 bits h is set, else 0: the fifth bits of 16 values of a
// q5_0 / q5_1 block (h = qh bits 0-15 for values 0-15, bits 16-31 for values 16-31). `bit`
// holds 1, 2, 4 .. 128 twice; vtst turns each tested bit into a whole byte.
inline uint8x16_t fifth_bits16(uint32_t h, uint8x16_t bit) {
  const uint8x16_t spread = vcombine_u8(vdup_n_u8(static_cast<uint8_t>(h)), vdup_n_u8(static_cast<uint8_t>(h >> 8)));
  return vandq_u8(vtstq_u8(spread, bit), vdupq_n_u8(0x10));
}

// q4_1, q5_0, q5_1: the AVX2 kernel's steps per block (dot_legacy above): one int32 dot product
// of the levels with the block's activations, times d_w * d_x into one of two f32 accumulators
// (even and odd blocks); q5_0's offset is taken off the levels (q - 16, -16 .. 15), the mins of
// q4_1 / q5_1 are added as m * d_x * sum(x_q) in a scalar.
template <DType type>
float dot_legacy_neon(const uint8_t* row, const QuantActivations& xa, size_t pf) {
  constexpr bool kFive = LegacyBlock<type>::kFive;
  constexpr bool kMin = LegacyBlock<type>::kMin;
  using Block = typename LegacyBlock<type>::Block;
  static constexpr uint8_t kBits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const int64_t nb = xa.n / kQ4Block;
  const auto* blocks = reinterpret_cast<const Block*>(row);
  const uint8x16_t m4 = vdupq_n_u8(0x0F), bit = vld1q_u8(kBits);
  float32x4_t acc[2] = {vdupq_n_f32(0), vdupq_n_f32(0)};
  float corr = 0;
  for (int64_t b = 0; b < nb; ++b) {
    if ((b & 3) == 0)
      __builtin_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(blocks + b) + pf), 0, 3);
    const Block& blk = blocks[b];
    const uint8x16_t v = vld1q_u8(blk.qs);
    uint8x16_t lo = vandq_u8(v, m4), hi = vshrq_n_u8(v, 4);
    if constexpr (kFive) {
      uint32_t h;
      std::memcpy(&h, blk.qh, 4);
      lo = vorrq_u8(lo, fifth_bits16(h, bit));
      hi = vorrq_u8(hi, fifth_bits16(h >> 16, bit));
    }
    int8x16_t w0 = vreinterpretq_s8_u8(lo), w1 = vreinterpretq_s8_u8(hi);
    if constexpr (type == DType::Q5_0) {
      w0 = vsubq_s8(w0, vdupq_n_s8(16));
      w1 = vsubq_s8(w1, vdupq_n_s8(16));
    }
    const int32x4_t d = dot32_neon(vdupq_n_s32(0), w0, w1, xa.q + b * kQ4Block);
    acc[b & 1] = vfmaq_n_f32(acc[b & 1], vcvtq_f32_s32(d), fp16_to_fp32(blk.d) * xa.d[b]);
    if constexpr (kMin) corr += fp16_to_fp32(blk.m) * xa.d[b] * static_cast<float>(xa.sum[b]);
  }
  return vaddvq_f32(vaddq_f32(acc[0], acc[1])) + corr;
}

// The totals of four 4-lane dot products, one per lane (two pairwise adds).
inline int32x4_t totals4(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
  return vpaddq_s32(vpaddq_s32(a, b), vpaddq_s32(c, d));
}

// 16 scale bytes (int8 or uint8 values below 128) widened to 4 vectors of int32, scales 4g .. 4g + 3
// in out[g].
inline void widen_scales16(int8x16_t s8, int32x4_t (&out)[4]) {
  const int16x8_t lo = vmovl_s8(vget_low_s8(s8)), hi = vmovl_high_s8(s8);
  out[0] = vmovl_s16(vget_low_s16(lo));
  out[1] = vmovl_high_s16(lo);
  out[2] = vmovl_s16(vget_low_s16(hi));
  out[3] = vmovl_high_s16(hi);
}

// The 2-bit fields of q2_K / q3_K: per 128-value half h, 32 bytes of qs hold 4 values each;
// values 128 h + 32 k + l (l < 32) are bits 2k, 2k + 1 of byte l. Each 16 values are one
// sub-block (8 h + 2 k and 8 h + 2 k + 1), whose dot products are totalled four at a time and
// multiplied by their int32 scales (sc[2 h] for k = 0, 1, sc[2 h + 1] for k = 2, 3). `level`
// makes the 16 signed levels from the 16 two-bit fields (in the low bits of its argument) of
// quarter k, bytes 16 half .. 16 half + 15.
template <class Level>
inline int32x4_t dot_2bit_fields(const uint8_t* qs, const int8_t* xq, const int32x4_t (&sc)[4], Level&& level) {
  const uint8x16_t m2 = vdupq_n_u8(3);
  int32x4_t isum = vdupq_n_s32(0);
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    uint8x16_t v0 = vld1q_u8(qs + 32 * h), v1 = vld1q_u8(qs + 32 * h + 16);
    int32x4_t d[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const int8_t* x = xq + 128 * h + 32 * k;
      d[(k & 1) * 2] = neon_dot_s8(vdupq_n_s32(0), level(vandq_u8(v0, m2), 4 * h + k, 0), vld1q_s8(x));
      d[(k & 1) * 2 + 1] = neon_dot_s8(vdupq_n_s32(0), level(vandq_u8(v1, m2), 4 * h + k, 1), vld1q_s8(x + 16));
      v0 = vshrq_n_u8(v0, 2);
      v1 = vshrq_n_u8(v1, 2);
      if (k & 1) isum = vmlaq_s32(isum, totals4(d[0], d[1], d[2], d[3]), sc[2 * h + k / 2]);
    }
  }
  return isum;
}

// q2_K: levels 0..3 with a 4-bit scale and a 4-bit min per 16 values; the mins go through the
// q8_K per-16 sums. The scalar reference's f32 steps: x.d * (d * isum - dmin * msum).
float dot_q2_k_neon(const uint8_t* row, const QuantActivations& xa, size_t pf) {
  const int64_t nb = xa.n / kQK;
  const auto* blocks = reinterpret_cast<const BlockQ2_K*>(row);
  const uint8x16_t m4 = vdupq_n_u8(0x0F);
  float acc = 0;
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ2_K& blk = blocks[b];
    const BlockQ8_K& x = xa.k[b];
    const char* ahead = reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(&blk) + pf);
    __builtin_prefetch(ahead, 0, 3);
    __builtin_prefetch(ahead + 64, 0, 3);
    const uint8x16_t packed = vld1q_u8(blk.scales);
    int32x4_t sc[4];
    widen_scales16(vreinterpretq_s8_u8(vandq_u8(packed, m4)), sc);
    const int32x4_t isum =
        dot_2bit_fields(blk.qs, x.qs, sc, [](uint8x16_t q, int, int) { return vreinterpretq_s8_u8(q); });
    // sum_j m_j * bsum_j over the 16 sub-blocks (|.| <= 15 * 16 * 127 * 16: exact in int32).
    const int16x8_t mn_lo = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(vshrq_n_u8(packed, 4))));
    const int16x8_t mn_hi = vreinterpretq_s16_u16(vmovl_high_u8(vshrq_n_u8(packed, 4)));
    const int16x8_t bs_lo = vld1q_s16(x.bsums), bs_hi = vld1q_s16(x.bsums + 8);
    int32x4_t m = vmull_s16(vget_low_s16(mn_lo), vget_low_s16(bs_lo));
    m = vmlal_high_s16(m, mn_lo, bs_lo);
    m = vmlal_s16(m, vget_low_s16(mn_hi), vget_low_s16(bs_hi));
    m = vmlal_high_s16(m, mn_hi, bs_hi);
    acc += x.d * (fp16_to_fp32(blk.d) * static_cast<float>(vaddvq_s32(isum)) -
                  fp16_to_fp32(blk.dmin) * static_cast<float>(vaddvq_s32(m)));
  }
  return acc;
}

// q3_K: levels q = 2 low bits | hmask bit << 2 (0..7) with signed 6-bit scales s_j - 32 per 16
// values; the reference's sum_j (s_j - 32) * (sub_j - 4 bsum_j) is computed with the levels
// q - 4 (-4 .. 3): a clear hmask bit takes 4 off the 2-bit field, a set one leaves it.
// Value 128 h + 32 k + l has its hmask bit at bit 4 h + k of hmask[l].
float dot_q3_k_neon(const uint8_t* row, const QuantActivations& xa, size_t pf) {
  const int64_t nb = xa.n / kQK;
  const auto* blocks = reinterpret_cast<const BlockQ3_K*>(row);
  const uint8x16_t four = vdupq_n_u8(4);
  float acc = 0;
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ3_K& blk = blocks[b];
    const BlockQ8_K& x = xa.k[b];
    const char* ahead = reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(&blk) + pf);
    __builtin_prefetch(ahead, 0, 3);
    __builtin_prefetch(ahead + 64, 0, 3);
    // The 16 six-bit scales from the twelve bytes, four at a time in 32-bit words (the layout
    // q3k_scale reads one value at a time; see q3k_scales above): low 4 bits from the nibbles
    // of bytes 0-7, top 2 bits from bytes 8-11.
    uint32_t w0, w1, w2;
    std::memcpy(&w0, blk.scales, 4);
    std::memcpy(&w1, blk.scales + 4, 4);
    std::memcpy(&w2, blk.scales + 8, 4);
    const uint32_t low4 = 0x0F0F0F0Fu, low2 = 0x03030303u;
    const uint32_t words[4] = {(w0 & low4) | ((w2 & low2) << 4), (w1 & low4) | (((w2 >> 2) & low2) << 4),
                               ((w0 >> 4) & low4) | (((w2 >> 4) & low2) << 4),
                               ((w1 >> 4) & low4) | (((w2 >> 6) & low2) << 4)};
    int32x4_t sc[4];
    widen_scales16(vsubq_s8(vreinterpretq_s8_u32(vld1q_u32(words)), vdupq_n_s8(32)), sc);
    const uint8x16_t hm[2] = {vld1q_u8(blk.hmask), vld1q_u8(blk.hmask + 16)};
    const int32x4_t isum = dot_2bit_fields(blk.qs, x.qs, sc, [&](uint8x16_t q, int bit, int half) {
      const uint8x16_t set = vtstq_u8(hm[half], vdupq_n_u8(static_cast<uint8_t>(1u << bit)));
      return vreinterpretq_s8_u8(vsubq_u8(q, vbicq_u8(four, set)));
    });
    acc += x.d * fp16_to_fp32(blk.d) * static_cast<float>(vaddvq_s32(isum));
  }
  return acc;
}

// q4_K / q5_K: sub-blocks 2p and 2p + 1 are the low and high nibbles of qs[32p ..] (q5_K: plus
// bit 2p / 2p + 1 of qh[l] as bit 4 of value l); each 32-value dot product times its 6-bit scale
// accumulates in int32; the mins come from the q8_K per-16 sums.
template <bool kFive>
float dot_q4_k_neon(const uint8_t* row, const QuantActivations& xa, size_t pf) {
  using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
  const int64_t nb = xa.n / kQK;
  const auto* blocks = reinterpret_cast<const Block*>(row);
  const uint8x16_t m4 = vdupq_n_u8(0x0F), b4 = vdupq_n_u8(0x10);
  float acc = 0;
  for (int64_t b = 0; b < nb; ++b) {
    const Block& blk = blocks[b];
    const BlockQ8_K& x = xa.k[b];
    const char* ahead = reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(&blk) + pf);
    __builtin_prefetch(ahead, 0, 3);
    __builtin_prefetch(ahead + 64, 0, 3);
    __builtin_prefetch(ahead + 128, 0, 3);
    int sc[8], mn[8];
    for (int j = 0; j < 8; ++j) k4_scale_min(blk.scales, j, sc[j], mn[j]);
    int32x4_t is0 = vdupq_n_s32(0), is1 = vdupq_n_s32(0);
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      const uint8x16_t v0 = vld1q_u8(blk.qs + 32 * p), v1 = vld1q_u8(blk.qs + 32 * p + 16);
      uint8x16_t lo0 = vandq_u8(v0, m4), lo1 = vandq_u8(v1, m4);
      uint8x16_t hi0 = vshrq_n_u8(v0, 4), hi1 = vshrq_n_u8(v1, 4);
      if constexpr (kFive) {
        const uint8x16_t qh0 = vld1q_u8(blk.qh), qh1 = vld1q_u8(blk.qh + 16);
        const uint8x16_t bit_lo = vdupq_n_u8(static_cast<uint8_t>(1u << (2 * p)));
        const uint8x16_t bit_hi = vdupq_n_u8(static_cast<uint8_t>(2u << (2 * p)));
        lo0 = vorrq_u8(lo0, vandq_u8(vtstq_u8(qh0, bit_lo), b4));
        lo1 = vorrq_u8(lo1, vandq_u8(vtstq_u8(qh1, bit_lo), b4));
        hi0 = vorrq_u8(hi0, vandq_u8(vtstq_u8(qh0, bit_hi), b4));
        hi1 = vorrq_u8(hi1, vandq_u8(vtstq_u8(qh1, bit_hi), b4));
      }
      is0 = vmlaq_n_s32(is0,
                        dot32_neon(vdupq_n_s32(0), vreinterpretq_s8_u8(lo0), vreinterpretq_s8_u8(lo1), x.qs + 64 * p),
                        sc[2 * p]);
      is1 = vmlaq_n_s32(
          is1, dot32_neon(vdupq_n_s32(0), vreinterpretq_s8_u8(hi0), vreinterpretq_s8_u8(hi1), x.qs + 64 * p + 32),
          sc[2 * p + 1]);
    }
    const int32_t isum = vaddvq_s32(vaddq_s32(is0, is1));
    int32_t msum = 0;
    for (int j = 0; j < 8; ++j) msum += mn[j] * (x.bsums[2 * j] + x.bsums[2 * j + 1]);
    acc += x.d * (fp16_to_fp32(blk.d) * static_cast<float>(isum) - fp16_to_fp32(blk.dmin) * static_cast<float>(msum));
  }
  return acc;
}

// q6_K: per 128-value half, 4 quarters of 32 values: 4 low bits from ql (low nibbles for
// quarters 0-1, high for 2-3), 2 high bits from qh; minus 32 gives signed bytes (-32 .. 31).
// Each 16 values' dot product times its int8 scale accumulates in int32.
float dot_q6_k_neon(const uint8_t* row, const QuantActivations& xa, size_t pf) {
  const int64_t nb = xa.n / kQK;
  const auto* blocks = reinterpret_cast<const BlockQ6_K*>(row);
  const uint8x16_t m4 = vdupq_n_u8(0x0F), m2 = vdupq_n_u8(0x03);
  const int8x16_t off = vdupq_n_s8(32);
  float acc = 0;
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ6_K& blk = blocks[b];
    const BlockQ8_K& x = xa.k[b];
    const char* ahead = reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(&blk) + pf);
    __builtin_prefetch(ahead, 0, 3);
    __builtin_prefetch(ahead + 64, 0, 3);
    __builtin_prefetch(ahead + 128, 0, 3);
    __builtin_prefetch(ahead + 192, 0, 3);
    int32x4_t is0 = vdupq_n_s32(0), is1 = vdupq_n_s32(0);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = blk.ql + 64 * h;
      const uint8_t* qh = blk.qh + 32 * h;
      const int8_t* xq = x.qs + 128 * h;
      const int8_t* sc = blk.scales + 8 * h;
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {  // values l = 16 half .. 16 half + 15 of each quarter
        const uint8x16_t l0 = vld1q_u8(ql + 16 * half), l1 = vld1q_u8(ql + 32 + 16 * half);
        const uint8x16_t hb = vld1q_u8(qh + 16 * half);
        const uint8x16_t q[4] = {vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(hb, m2), 4)),
                                 vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m2), 4)),
                                 vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m2), 4)),
                                 vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4))};
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          const int8x16_t w = vsubq_s8(vreinterpretq_s8_u8(q[k]), off);
          // Sub-block of values 32 k + 16 half .. + 15 of this half: 2 k + half.
          const int32x4_t d = neon_dot_s8(vdupq_n_s32(0), w, vld1q_s8(xq + 32 * k + 16 * half));
          if (k & 1) {
            is1 = vmlaq_n_s32(is1, d, sc[2 * k + half]);
          } else {
            is0 = vmlaq_n_s32(is0, d, sc[2 * k + half]);
          }
        }
      }
    }
    acc += x.d * fp16_to_fp32(blk.d) * static_cast<float>(vaddvq_s32(vaddq_s32(is0, is1)));
  }
  return acc;
}

}  // namespace

void quant_dot_rows_neon(const WeightView& w, const QuantActivations& xa, int64_t r0, int64_t r1, float* y) {
  const size_t pf = block_prefetch_bytes(w.type, w.cols);
  switch (w.type) {
    case DType::Q4_0:
      for (int64_t r = r0; r < r1; ++r) y[r - r0] = dot_q4_0_neon(w.row(r), xa, pf);
      return;
    case DType::Q4_1:
      for (int64_t r = r0; r < r1; ++r) y[r - r0] = dot_legacy_neon<DType::Q4_1>(w.row(r), xa, pf);
      return;
    case DType::Q5_0:
      for (int64_t r = r0; r < r1; ++r) y[r - r0] = dot_legacy_neon<DType::Q5_0>(w.row(r), xa, pf);
      return;
    case DType::Q5_1:
      for (int64_t r = r0; r < r1; ++r) y[r - r0] = dot_legacy_neon<DType::Q5_1>(w.row(r), xa, pf);
      return;
    case DType::Q2_K:
      for (int64_t r = r0; r < r1; ++r) y[r - r0] = dot_q2_k_neon(w.row(r), xa, pf);
      return;
    case DType::Q3_K:
      for (int64_t r = r0; r < r1; ++r) y[r - r0] = dot_q3_k_neon(w.row(r), xa, pf);
      return;
    case DType::Q4_K:
      for (int64_t r = r0; r < r1; ++r) y[r - r0] = dot_q4_k_neon<false>(w.row(r), xa, pf);
      return;
    case DType::Q5_K:
      for (int64_t r = r0; r < r1; ++r) y[r - r0] = dot_q4_k_neon<true>(w.row(r), xa, pf);
      return;
    case DType::Q6_K:
      for (int64_t r = r0; r < r1; ++r) y[r - r0] = dot_q6_k_neon(w.row(r), xa, pf);
      return;
    case DType::IQ4_NL:
      for (int64_t r = r0; r < r1; ++r) y[r - r0] = dot_table4_neon<DType::IQ4_NL>(w.row(r), xa, pf);
      return;
    case DType::MXFP4:
      for (int64_t r = r0; r < r1; ++r) y[r - r0] = dot_table4_neon<DType::MXFP4>(w.row(r), xa, pf);
      return;
    case DType::IQ4_XS:
      for (int64_t r = r0; r < r1; ++r) y[r - r0] = dot_iq4_xs_neon(w.row(r), xa, pf);
      return;
    default: fail("no integer dot product for {} weights", dtype_name(w.type));
  }
}
#else
void quant_dot_rows_neon(const WeightView&, const QuantActivations&, int64_t, int64_t, float*) {
  fail("this build has no NEON dot-product path");
}
#endif

}  // namespace kvslim::KVSLIM_ISA_NS::detail
