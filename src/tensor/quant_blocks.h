// Byte layouts of ggml's block-quantised weight types (as stored in GGUF files), written down from
// the GGUF/ggml format. All multi-byte fields are little-endian; "half" is an IEEE fp16.
//
// Legacy types quantise blocks of 32 values. K-quants quantise super-blocks of 256 values split
// into sub-blocks (16 of 16 values, or 8 of 32) whose scales (and mins) are themselves quantised
// to 4, 6 or 8 bits against one or two fp16 super-block factors.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>

namespace kvslim {

constexpr int kQ4Block = 32;  // values per block of q4_0 / q4_1 / q5_0 / q5_1
constexpr int kQK = 256;      // values per K-quant super-block

// q4_0, 4.5 bits per weight. Value i of the block: d * (q_i - 8), q_i in [0, 15]:
// q_i = qs[i] & 0xF for i < 16, qs[i - 16] >> 4 for i >= 16 (low nibbles hold the first half).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_0) == 18);

// q4_1, 5 bits per weight. Value i: d * q_i + m, q_i in [0, 15], nibbles as in q4_0.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_1) == 20);

// q5_0, 5.5 bits per weight. Value i: d * (q_i - 16), q_i in [0, 31]: the low 4 bits as the q4_0
// nibbles, the 5th bit is bit i of qh read as one little-endian uint32.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_0) == 22);

// q5_1, 6 bits per weight. Value i: d * q_i + m, q_i in [0, 31], bits as in q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_1) == 24);

// q2_K, 2.625 bits per weight. 16 sub-blocks of 16 values. scales[j]: low nibble = 4-bit scale
// s_j, high nibble = 4-bit min m_j of sub-block j. Value = d * s_j * q - dmin * m_j, q in [0, 3].
// q of value i: with h = i / 128, r = i % 128: byte qs[32 h + r % 32], bits 2 * (r / 32) .. +1
// (each 128-value half uses 32 bytes; its four 32-value quarters sit in successive bit pairs).
struct BlockQ2_K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);

// q3_K, 3.4375 bits per weight. 16 sub-blocks of 16 values with signed 6-bit scales.
// Value = d * (s_j - 32) * (q - 4) where q in [0, 7] is 2 low bits (packed exactly as q2_K's qs)
// plus a high bit: bit (i / 32) of hmask[i % 32]. NOTE the value subtracts 4 when the high bit
// is CLEAR: (low | high << 2) - 4.
// The 16 six-bit scales s_j (stored + 32, so unsigned) in 12 bytes:
//   low 4 bits of s_j:  scales[j] & 0xF for j < 8, scales[j - 8] >> 4 for j >= 8;
//   high 2 bits of s_j: bits 2 * (j / 4) .. +1 of scales[8 + j % 4].
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// The stored (unsigned, + 32) 6-bit scale s_j of a q3_K block, j < 16.
inline int q3k_scale(const uint8_t* scales, int j) {
  const int low = j < 8 ? (scales[j] & 0xF) : (scales[j - 8] >> 4);
  return low | (((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
}

// The 12-byte scale/min packing of q4_K and q5_K: 8 six-bit scales sc_j and 8 six-bit mins m_j.
//   j < 4:  sc_j = scales[j] & 63,                          m_j = scales[j + 4] & 63
//   j >= 4: sc_j = (scales[j + 4] & 0xF) | (scales[j - 4] >> 6) << 4,
//           m_j  = (scales[j + 4] >> 4)  | (scales[j]     >> 6) << 4
// (bytes 0-3: sc_0..3 + the top 2 bits of sc_4..7; bytes 4-7: m_0..3 + the top 2 bits of
// m_4..7; bytes 8-11: the low nibbles of sc_4..7 | m_4..7 << 4).
inline void k4_scale_min(const uint8_t* scales, int j, int& sc, int& m) {
  if (j < 4) {
    sc = scales[j] & 63;
    m = scales[j + 4] & 63;
  } else {
    sc = (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4);
    m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// q4_K, 4.5 bits per weight. 8 sub-blocks of 32 values. Value = d * sc_j * q - dmin * m_j,
// q in [0, 15]. Sub-blocks 2p and 2p + 1 share bytes qs[32 p .. 32 p + 31]: the low nibbles
// hold sub-block 2p, the high nibbles sub-block 2p + 1.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_K) == 144);

// q5_K, 5.5 bits per weight. As q4_K, plus a 5th bit: value i (sub-block j = i / 32, l = i % 32)
// has its high bit at bit j of qh[l]; q in [0, 31].
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ5_K) == 176);

// q6_K, 6.5625 bits per weight. 16 sub-blocks of 16 values with signed 8-bit scales.
// Value = d * scales[i / 16] * (q - 32), q in [0, 63]. With h = i / 128, r = i % 128, l = r % 32,
// quarter k = r / 32: the low 4 bits are ql[64 h + l + 32 (k & 1)], low nibble for k < 2, high
// nibble for k >= 2; the high 2 bits are bits 2k .. 2k + 1 of qh[32 h + l].
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// The non-linear 4-bit types iq4_nl and iq4_xs: a 4-bit index i picks the level kIQ4Levels[i]
// (a fixed table, denser near 0, where trained weights concentrate) instead of i - 8.
inline constexpr int8_t kIQ4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
// iq4_nl, 4.5 bits per weight. Value i of a 32-value block: d * kIQ4Levels[q_i], with q_i the
// nibbles laid out as in q4_0 (low nibbles hold values 0..15, high nibbles 16..31).
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[16];
};
static_assert(sizeof(BlockIQ4_NL) == 18);
// iq4_xs, 4.25 bits per weight. 8 sub-blocks of 32 values, each with a signed 6-bit scale
// ls_j - 32 (ls_j: low 4 bits in nibble j % 2 of scales_l[j / 2], high 2 bits at bits 2j..2j+1
// of scales_h). Value = d * (ls_j - 32) * kIQ4Levels[q], sub-block j's nibbles in qs[16 j ..
// 16 j + 15] laid out as one iq4_nl block.
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};
static_assert(sizeof(BlockIQ4_XS) == 136);
// The signed scale ls_j - 32 of sub-block j < 8 of an iq4_xs block.
inline int iq4xs_scale(const BlockIQ4_XS& b, int j) {
  const int low = (b.scales_l[j / 2] >> (4 * (j % 2))) & 0xF;
  return (low | (((b.scales_h >> (2 * j)) & 3) << 4)) - 32;
}

// mxfp4 (OCP microscaling FP4, gpt-oss's expert weights), 4.25 bits per weight. One E8M0 byte e
// (a bare power of two, 2^(e - 127): no sign, no mantissa) then 16 bytes of 4-bit e2m1 codes laid
// out as q4_0's nibbles. The e2m1 values 0, 0.5, 1, 1.5, 2, 3, 4, 6 (codes 0-7) and their
// negatives (codes 8-15, sign bit 3) are stored doubled as the int8 table kMXFP4Levels, so value
// i = 2^(e - 128) * kMXFP4Levels[q_i]: the block scale halved (ggml's convention), and the kernels
// treat mxfp4 as iq4_nl with another table and scale.
inline constexpr int8_t kMXFP4Levels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[16];
};
static_assert(sizeof(BlockMXFP4) == 17);
// 2^(e - 128), the halved scale of an mxfp4 block, exactly: e = 0 and 1 give the f32 subnormals
// 2^-128 and 2^-127, e >= 2 the normal number with biased exponent e - 1. (e = 255, NaN in the
// OCP format, reads as 2^127 here as in ggml.)
// Read from a 256-entry table: one load in the decode kernels' per-block chain, where the
// branch, shift and register move of the formula showed.
inline constexpr std::array<float, 256> kE8M0Half = [] {
  std::array<float, 256> t{};
  for (uint32_t e = 0; e < 256; ++e) t[e] = std::bit_cast<float>(e < 2 ? (0x00200000u << e) : ((e - 1) << 23));
  return t;
}();
inline float e8m0_to_fp32_half(uint8_t e) { return kE8M0Half[e]; }

// q8_K, the activation type of the K-quant dot products (never stored in model files):
// value i = d * qs[i]; bsums[k] = sum of qs[16 k .. 16 k + 15] (lets the kernels apply the
// per-sub-block mins with one multiply per sub-block).
struct BlockQ8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};
static_assert(sizeof(BlockQ8_K) == 292);

}  // namespace kvslim
