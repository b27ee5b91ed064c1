// Int8 GEMM for AVX2 (and AVX-VNNI, below): the same weight types, the same activation quantisation and
// the same f32 steps as the AVX-512 VNNI kernel of matmul_q8.cpp, so where both exist they give
// identical bits.
//
// AVX2's only 8-bit multiply is vpmaddubsw (_mm256_maddubs_epi16): u8 x s8 products added in
// pairs into int16 with saturation. Feeding it the VNNI kernel's (w + 128) would saturate
// (2 * 255 * 127 > 32767), so the weights go in as small unsigned levels u and the rest is
// carried by integers that stay exact:
//   - every type's block value q is u - o with u >= 0: q4_0 u = q + 8 (0..15), q5_0 u = q + 16
//     (0..31), q4_1 / q4_K / q5_1 / q5_K u = q (their levels; the min is applied separately),
//     q8_0 and the iq4 types' table levels u = q + 128 (0..255) split into two 4-bit planes
//     u = lo + 16 * hi.
//     mxfp4's table levels -12..12 go in as u = q + 12 (0..24), 5 bits as q5_0's.
//   - the activations are |x_q| <= 127 (d = amax / 127, q = round(x / d)), so one pair of
//     products is at most 2 * 15 * 127 = 3810 for 4-bit levels and 2 * 31 * 127 = 7874 for
//     5-bit ones. int16 sums of 8 maddubs results (4-bit: 30480) or 4 (5-bit: 31496) cannot
//     overflow; such a chain of quads is widened once with vpmaddwd (by 1, or by 16 for q8_0's
//     high plane) into int32.
//   - sum(q * x) = sum(u * x) - o * sum(x); the int32 sum starts at the correction -o * sum(x)
//     of the activation block (sum(x) is known from packing X).
// So each block's int32 sum is sum(q * x) exactly, the VNNI kernel's integer; it is then scaled
// as there: acc = fma(float(sum), d_w * d_x, acc), plus min * (d_x * sum(x)) for the types with
// mins, summed in f32 per K slice of kInt8SliceBlocks blocks, slices added in order into y.
//
// Layouts: X is quantised once per call and packed in panels of kMR tokens: per block,
// [quad][token][4 bytes] int8, then the kMR scales, corrections and sums. Threads take chunks of
// kNR-row weight panels from a queue; per K slice a thread repacks a panel as
// [plane][quad][row][4 bytes] levels plus f32 scales and mins [row]. The micro-kernel keeps
// kMR x kNRV int16 chain sums in registers while it walks a chain of quads: per quad it loads
// kNRV weight vectors (8 rows x 4 levels each) and broadcasts each token's 4 activations.
//
// At the avxvnni level the same layouts and steps run with vpdpbusd in place of vpmaddubsw: the
// int32 sums take each quad directly (no int16 chains, no widening), so the results are the
// AVX2 kernel's bits.
//
// q3_K and q6_K (value = d * sub_h * (level - o), o = 4 / 32, an int8 sub_h per 16-value half h
// of a block) are fed as u = level (0..7 / 0..63) with one int16 chain per half, which starts at
// -o times the half's activation pair sums (so it ends at the pair sums of (u - o) * x, at most
// 4 * 2 * 32 * 127 = 32512) and is widened by vpmaddwd with sub_h: the block's int32 sum is
// sum_h sub_h * sum(q * x), exact (below 2^24, so its float is too), then scaled by d * d_x like
// any block. This runs at every x86 level, vpmaddubsw at avxvnni too (vpdpbusd's int32 sums could
// not be weighted per half without a 32-bit multiply), and on 512-bit registers at the AVX-512
// levels (micro_kernel on Zmm, the same sums and f32 steps), where the VNNI and AMX kernels take
// the other types; at avx512f (no VNNI) every type runs on Zmm. q2_K (u = its 2-bit level, o = 0)
// has a 4-bit scale and a 4-bit min per half: its min term sum_h m_h * (half h's sum of x_q) is
// one vpmaddwd of the row's two mins with the token's two half sums (int16 pairs), exact, then
// scaled by -dmin * d_x in f32.
#include <algorithm>
#include <cstring>
#include <utility>

#include "tensor/kernels.h"
#include "tensor/matmul_internal.h"
#include "tensor/tensor_isa.h"
#include "util/error.h"

#include "tensor/isa_begin.h"
#include "tensor/simd.h"
#include "tensor/int8_gemm_driver.h"

// Also at the AVX-512 levels, for q3_K and q6_K.
#if defined(KVSLIM_HAS_AVX2) && defined(KVSLIM_HAS_FMA)
#define KVSLIM_Q8_GEMM_AVX2 1
#endif

namespace kvslim::KVSLIM_ISA_NS::detail {

#if defined(KVSLIM_Q8_GEMM_AVX2)

namespace {

constexpr int64_t kKB = kInt8SliceBlocks;  // blocks per K slice

// A micro-tile of kMR tokens x kNR = 8 * kNRV weight rows (kNRV ymm registers, or kNRV / 2 zmm),
// for weights fed as kPlanes planes of levels whose int16 chain sums may run over kChain quads.
// kSubScales: q3_K's and q6_K's two 16-value halves per block, each with its own int8 scale (see
// half_patterns).
template <int MR, int NRV, int Planes, int Chain, bool Mins, bool SubScales = false>
struct Tile {
  static constexpr int kMR = MR;
  static constexpr int kNRV = NRV;
  static constexpr int kNR = 8 * NRV;
  static constexpr int kPlanes = Planes;
  static constexpr int kChain = Chain;
  static constexpr int kChains = 8 / Chain;  // chains per block (each over every plane)
  static constexpr bool kMins = Mins;
  static constexpr bool kSubScales = SubScales;
  static_assert(8 % Chain == 0 && (Planes == 1 || Planes == 2));
  static_assert(!SubScales || (Chain == 4 && Planes == 1));  // one chain per 16-value half
  // One packed X block: q [8][kMR][4], then scales [kMR] f32, corrections [kMR] and sums [kMR] i32
  // (kSubScales: the halves' patterns; with kMins, q2_K, then the halves' sums [kMR] as int16 pairs).
  static constexpr size_t kXLevels = 8 * kMR * 4;
  static constexpr size_t kXBlockBytes = kXLevels + (kSubScales && kMins ? 4 : 3) * kMR * 4;
  // One packed W block: levels [kPlanes][8][kNR][4], then scales [kNR] and mins [kNR] f32, or
  // (kSubScales) scales [kNR] f32 and the halves' scale patterns [2][kNR] i32, and with kMins (q2_K)
  // the halves' mins [kNR] as int16 pairs and -dmin [kNR] f32.
  static constexpr size_t kWLevels = static_cast<size_t>(kPlanes) * 8 * kNR * 4;
  static constexpr size_t kWBlockBytes = kWLevels + (kSubScales ? (kMins ? 5 : 3) : 2) * kNR * 4;
};

// o with u = q + o >= 0 for the values q of unpack_int8_block (see the top of the file).
int level_offset(DType type) {
  switch (type) {
    case DType::Q8_0:
    case DType::IQ4_NL:  // table levels -127..113
    case DType::IQ4_XS: return 128;
    case DType::Q4_0: return 8;
    case DType::Q5_0: return 16;
    case DType::MXFP4: return 12;  // table levels -12..12: u = 0..24, 5 bits as q5_0's
    case DType::Q3_K: return 4;    // q - 4 for the 3-bit level: u = the level
    case DType::Q6_K: return 32;   // q - 32 for the 6-bit level: u = the level
    default: return 0;             // q4_1, q5_1, q2_K, q4_K, q5_K: q is the level
  }
}

// Two int16 as the int32 whose low half is lo and high half hi (vpmaddwd's pairs).
int32_t int16_pair(int lo, int hi) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(lo)) |
                              (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16));
}

// The sum of half h (values 16h .. 16h + 15) of an activation block's q.
int half_sum(const int8_t* q, int h) {
  int s = 0;
  for (int i = 16 * h; i < 16 * h + 16; ++i) s += q[i];
  return s;
}

// q2_K / q3_K / q6_K: the int16 pair sums that vpmaddubsw(offset, x) gives over each 16-value half of an
// activation block (quads 0-3 and 4-7), negated, as the int32 broadcast that starts the half's
// chain: the chain then holds the pair sums of (u - offset) * x = q * x, so a half's sum can be
// scaled by its row's int8 scale with vpmaddwd (a per-token correction could not: it would be
// row-dependent). |32 * 8 * 127| = 32512 fits in int16.
void half_patterns(const int8_t* q, int offset, int32_t& half0, int32_t& half1) {
  int32_t pat[2];
  for (int h = 0; h < 2; ++h) {
    int lo = 0, hi = 0;
    for (int qd = 4 * h; qd < 4 * h + 4; ++qd) {
      lo += q[4 * qd] + q[4 * qd + 1];
      hi += q[4 * qd + 2] + q[4 * qd + 3];
    }
    pat[h] = int16_pair(-offset * lo, -offset * hi);
  }
  half0 = pat[0];
  half1 = pat[1];
}

// X packed for tile T: per block the levels, then scales, corrections -offset * sum(q) and sums
// (for kSubScales tiles, the two halves' half_patterns in place of corrections and sums).
template <class T>
void pack_x_panel(const float* x, int64_t n, int64_t k, int64_t t0, int offset, uint8_t* dst) {
  constexpr int kMR = T::kMR;
  const int64_t nb = k / kQ8Block;
  const int mt = static_cast<int>(std::min<int64_t>(kMR, n - t0));
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* blk = dst + b * T::kXBlockBytes;
    auto* scales = reinterpret_cast<float*>(blk + T::kXLevels);
    auto* corr = reinterpret_cast<int32_t*>(scales + kMR);
    auto* sums = corr + kMR;
    for (int t = 0; t < kMR; ++t) {
      alignas(32) int8_t q[kQ8Block];
      float d = 0.0f;
      int32_t sum = 0;
      if (t < mt) {
        quantize_x_block(x + (t0 + t) * k + b * kQ8Block, q, d, sum);
      } else {
        std::memset(q, 0, sizeof(q));
      }
      scales[t] = d;
      if constexpr (T::kSubScales) {
        half_patterns(q, offset, corr[t], sums[t]);
        if constexpr (T::kMins) sums[kMR + t] = int16_pair(half_sum(q, 0), half_sum(q, 1));
      } else {
        corr[t] = -offset * sum;
        sums[t] = sum;
      }
      for (int qd = 0; qd < 8; ++qd) std::memcpy(blk + (qd * kMR + t) * 4, q + 4 * qd, 4);
    }
  }
}

// The 8 x 8 transpose of 32-bit elements: out[i] holds element i of in[0..7] (in place).
inline void transpose8x8_epi32(__m256i (&r)[8]) {
  __m256i t[8], s[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);  // per lane: r_i[0], r_i+1[0], r_i[1], r_i+1[1]
    t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    s[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);  // per lane: element 0 of four rows
    s[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
    s[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
    s[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2x128_si256(s[i], s[i + 4], 0x20);  // elements 0..3: the low lanes
    r[i + 4] = _mm256_permute2x128_si256(s[i], s[i + 4], 0x31);
  }
}

// Packs rows [r0, r0 + kNR) x blocks [b0, b0 + nbk) of w as levels u = q + offset (split into
// nibble planes when kPlanes == 2); rows past the end get levels 0 and scale 0. Each group of 8
// rows is unpacked into 8 registers (one row's 32 levels each) and transposed as 8 x 8 quads, so
// that every [plane][quad] line of the panel is one 32-byte store: a prefill whose GEMMs are
// short (a mixture of experts gives each expert a few dozen tokens of a block) repacks as many
// weight bytes as it multiplies.
template <class T>
void pack_w_panel(const WeightView& w, int64_t r0, int64_t b0, int64_t nbk, int offset, uint8_t* dst) {
  constexpr int kNR = T::kNR;
  const int nr = static_cast<int>(std::min<int64_t>(kNR, w.rows - r0));
  const __m256i off = _mm256_set1_epi8(static_cast<char>(offset));
  const __m256i nib = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < nbk; ++b) {
    uint8_t* blk = dst + b * T::kWBlockBytes;
    auto* scales = reinterpret_cast<float*>(blk + T::kWLevels);
    auto* mins = scales + kNR;                      // (kSubScales: no mins)
    auto* subs = reinterpret_cast<int32_t*>(mins);  // (kSubScales) [half][row]: the half's int8 scale in both int16
    // Only q2_K's tiles (kSubScales and kMins) have these two; for the others they would point
    // past the block (past the buffer for its last block), so they are not formed at all.
    constexpr bool kHalfMins = T::kSubScales && T::kMins;
    int32_t* half_mins = kHalfMins ? subs + 2 * kNR : nullptr;  // [row]: the halves' mins as int16
    float* min_scales = kHalfMins ? reinterpret_cast<float*>(subs + 3 * kNR) : nullptr;  // [row]: -dmin
    for (int v = 0; v < T::kNRV; ++v) {
      __m256i u[8];
      for (int j = 0; j < 8; ++j) {
        const int row = 8 * v + j;
        if (row >= nr) {
          scales[row] = 0.0f;
          mins[row] = 0.0f;
          if constexpr (T::kSubScales) subs[kNR + row] = 0;
          if constexpr (kHalfMins) {
            half_mins[row] = 0;
            min_scales[row] = 0.0f;
          }
          u[j] = _mm256_setzero_si256();  // level 0 in every plane, whatever the offset
          continue;
        }
        alignas(32) int8_t q[kQ8Block];
        if constexpr (T::kSubScales) {
          Int8Halves hs;
          unpack_int8_halves(w.type, w.row(r0 + row), b0 + b, q, hs);
          scales[row] = hs.d;
          for (int h = 0; h < 2; ++h) subs[h * kNR + row] = int16_pair(hs.sub[h], hs.sub[h]);
          if constexpr (T::kMins) {
            half_mins[row] = int16_pair(hs.min[0], hs.min[1]);
            min_scales[row] = -hs.dmin;
          }
        } else {
          unpack_int8_block(w.type, w.row(r0 + row), b0 + b, q, scales[row], mins[row]);
        }
        // Read back as the two 16-byte halves most types' unpacking stores: one 32-byte load of
        // them cannot take its bytes from the pending stores and waits for them to retire.
        const __m256i levels =
            _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(q))),
                                    _mm_load_si128(reinterpret_cast<const __m128i*>(q + 16)), 1);
        u[j] = _mm256_add_epi8(levels, off);
      }
      for (int p = 0; p < T::kPlanes; ++p) {
        __m256i plane[8];
        for (int j = 0; j < 8; ++j) {
          plane[j] = T::kPlanes == 1 ? u[j]
                     : p == 0        ? _mm256_and_si256(u[j], nib)
                                     : _mm256_and_si256(_mm256_srli_epi16(u[j], 4), nib);
        }
        transpose8x8_epi32(plane);
        for (int qd = 0; qd < 8; ++qd)
          _mm256_store_si256(reinterpret_cast<__m256i*>(blk + ((p * 8 + qd) * kNR + 8 * v) * 4), plane[qd]);
      }
    }
  }
}

// The registers a micro-kernel runs on: Ymm, 8 weight rows per register (every x86 level), or
// Zmm, 16 (the AVX-512 levels). Both read the same packed panels (a [quad] line of kNR rows is
// kNR / 8 ymm or kNR / 16 zmm registers) and do the same integer and f32 steps per lane, so the
// two give the same bits.
struct Ymm {
  using I = __m256i;
  using F = __m256;
  static constexpr int kRows = 8;
#if defined(KVSLIM_HAS_AVXVNNI)
  static constexpr bool kDpbusd = true;  // vpdpbusd on ymm (the avxvnni level)
#else
  static constexpr bool kDpbusd = false;
#endif
  static I load(const void* p) { return _mm256_load_si256(static_cast<const __m256i*>(p)); }
  static I set1(int32_t v) { return _mm256_set1_epi32(v); }
  static I set1_16(int16_t v) { return _mm256_set1_epi16(v); }
  static I zero() { return _mm256_setzero_si256(); }
  static I maddubs(I u, I s) { return _mm256_maddubs_epi16(u, s); }
  static I add16(I a, I b) { return _mm256_add_epi16(a, b); }
  static I add32(I a, I b) { return _mm256_add_epi32(a, b); }
  static I madd(I a, I b) { return _mm256_madd_epi16(a, b); }
  static I times16(I a) { return _mm256_slli_epi32(a, 4); }
  // An empty asm the value must pass through: keeps GCC from re-associating a chain's int16 sums
  // into a tree over all of the block's products (computed first, they need far more than 16
  // registers and spilled 2.5 values per vpmaddubsw).
  static I pinned(I v) {
    asm("" : "+x"(v));
    return v;
  }
  static F zerof() { return _mm256_setzero_ps(); }
  static F loadf(const float* p) { return _mm256_load_ps(p); }
  static F set1f(float v) { return _mm256_set1_ps(v); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F cvt(I a) { return _mm256_cvtepi32_ps(a); }
  // Writes (first) or adds the tile into c: tokens from mt and rows from nr on are left alone.
  template <int kMR, int kV>
  static void store_tile(const F (&facc)[kMR][kV], float* c, int64_t ldc, int mt, int nr, bool first) {
    __m256i masks[kV];
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int v = 0; v < kV; ++v) masks[v] = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr - 8 * v), lane);
#pragma GCC unroll 8
    for (int t = 0; t < kMR; ++t) {
      if (t >= mt) break;
      float* ct = c + t * ldc;
#pragma GCC unroll 4
      for (int v = 0; v < kV; ++v) {
        __m256 r = facc[t][v];
        if (nr == 8 * kV) {
          if (!first) r = _mm256_add_ps(r, _mm256_loadu_ps(ct + 8 * v));
          _mm256_storeu_ps(ct + 8 * v, r);
        } else {
          if (!first) r = _mm256_add_ps(r, _mm256_maskload_ps(ct + 8 * v, masks[v]));
          _mm256_maskstore_ps(ct + 8 * v, masks[v], r);
        }
      }
    }
  }
};

#if defined(KVSLIM_HAS_AVX512BW)
struct Zmm {
  using I = __m512i;
  using F = __m512;
  static constexpr int kRows = 16;
  static constexpr bool kDpbusd = false;  // the VNNI levels' other kernels take those types
  static I load(const void* p) { return _mm512_loadu_si512(p); }
  static I set1(int32_t v) { return _mm512_set1_epi32(v); }
  static I set1_16(int16_t v) { return _mm512_set1_epi16(v); }
  static I zero() { return _mm512_setzero_si512(); }
  static I maddubs(I u, I s) { return _mm512_maddubs_epi16(u, s); }
  static I add16(I a, I b) { return _mm512_add_epi16(a, b); }
  static I add32(I a, I b) { return _mm512_add_epi32(a, b); }
  static I madd(I a, I b) { return _mm512_madd_epi16(a, b); }
  static I times16(I a) { return _mm512_slli_epi32(a, 4); }
  static I pinned(I v) {  // as Ymm::pinned
    asm("" : "+v"(v));
    return v;
  }
  static F zerof() { return _mm512_setzero_ps(); }
  static F loadf(const float* p) { return _mm512_loadu_ps(p); }
  static F set1f(float v) { return _mm512_set1_ps(v); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F cvt(I a) { return _mm512_cvtepi32_ps(a); }
  template <int kMR, int kV>
  static void store_tile(const F (&facc)[kMR][kV], float* c, int64_t ldc, int mt, int nr, bool first) {
    store_tile_512<kMR, kV>(facc, c, ldc, mt, nr, first);
  }
};
#endif

// Adds chain kC of a block (quads [q0, q0 + kChain) of every plane) to the block's int32 sums
// isum; the first chain starts them at the correction. The planes share the activation
// broadcasts. A function of its own with constant bounds, so that GCC keeps the chains in
// registers.
//
// vpmaddubsw: int16 chains, widened once per chain with vpmaddwd. For kSubScales tiles (q2_K,
// q3_K, q6_K) a chain is one 16-value half: it starts at the half's negated pattern (so it holds
// the pair sums of q * x) and is widened by the row's scale of that half, which makes isum the
// block's sum of sub[h] * q * x; the block's d then scales it like any other type's.
// At the avxvnni level (but for kSubScales tiles, whose halves' scales vpmaddwd applies to int16
// chains) vpdpbusd adds each quad's four products into int32 without saturating: the sums run in
// int32 from the start (plane 1 apart, weighted by 16 at the end), the same integers.
template <class T, class V, int kC>
[[gnu::always_inline]] inline void add_chain(const uint8_t* wb, const uint8_t* xb, const int32_t* xcorr,
                                             typename V::I (&isum)[T::kMR][T::kNR / V::kRows]) {
  using I = typename V::I;
  constexpr int kMR = T::kMR, kV = T::kNR / V::kRows, kNR = T::kNR, kPlanes = T::kPlanes;
  constexpr int q0 = kC * T::kChain;
  constexpr bool kDpbusd = V::kDpbusd && !T::kSubScales;
  I sums[kPlanes][kMR][kV];   // (kDpbusd) int32 sums
  I chain[kPlanes][kMR][kV];  // (else) int16 pair sums of this chain of quads
  if constexpr (kDpbusd) {
#pragma GCC unroll 8
    for (int t = 0; t < kMR; ++t) {
#pragma GCC unroll 4
      for (int v = 0; v < kV; ++v) {
        sums[0][t][v] = kC == 0 ? V::set1(xcorr[t]) : isum[t][v];
        if constexpr (kPlanes == 2) sums[1][t][v] = V::zero();
      }
    }
  }
#pragma GCC unroll 8
  for (int qd = q0; qd < q0 + T::kChain; ++qd) {
    I wv[kPlanes][kV];
#pragma GCC unroll 2
    for (int p = 0; p < kPlanes; ++p) {
#pragma GCC unroll 4
      for (int v = 0; v < kV; ++v) wv[p][v] = V::load(wb + ((p * 8 + qd) * kNR + V::kRows * v) * 4);
    }
    const auto* xq = reinterpret_cast<const int32_t*>(xb + qd * kMR * 4);
#pragma GCC unroll 8
    for (int t = 0; t < kMR; ++t) {
      const I xv = V::set1(xq[t]);
#pragma GCC unroll 2
      for (int p = 0; p < kPlanes; ++p) {
#pragma GCC unroll 4
        for (int v = 0; v < kV; ++v) {
          if constexpr (kDpbusd) {
#if defined(KVSLIM_HAS_AVXVNNI)
            sums[p][t][v] = dpbusd256(sums[p][t][v], wv[p][v], xv);
#endif
          } else {
            const I prod = V::maddubs(wv[p][v], xv);
            I start = prod;
            if constexpr (T::kSubScales) start = V::add16(prod, V::set1(xcorr[kC * kMR + t]));
            chain[p][t][v] = V::pinned(qd == q0 ? start : V::add16(chain[p][t][v], prod));
          }
        }
      }
    }
  }
  // Plane p holds bits 4p.. of the levels: widened with weight 16^p.
  const I ones = V::set1_16(1), sixteens = V::set1_16(16);
  const auto* subs = reinterpret_cast<const int32_t*>(wb + T::kWLevels + kNR * 4) + kC * kNR;
#pragma GCC unroll 8
  for (int t = 0; t < kMR; ++t) {
#pragma GCC unroll 4
    for (int v = 0; v < kV; ++v) {
      if constexpr (kDpbusd) {
        isum[t][v] = kPlanes == 2 ? V::add32(sums[0][t][v], V::times16(sums[1][t][v])) : sums[0][t][v];
      } else if constexpr (T::kSubScales) {
        const I wide = V::madd(chain[0][t][v], V::load(subs + V::kRows * v));
        isum[t][v] = kC == 0 ? wide : V::add32(isum[t][v], wide);
      } else {
        I wide = V::madd(chain[0][t][v], ones);
        if constexpr (kPlanes == 2) wide = V::add32(wide, V::madd(chain[1][t][v], sixteens));
        isum[t][v] = kC == 0 ? V::add32(V::set1(xcorr[t]), wide) : V::add32(isum[t][v], wide);
      }
    }
  }
}

// kMR tokens x kNR rows of tile T on registers V.
template <class T, class V>
void micro_kernel(const uint8_t* xp, const uint8_t* wp, int64_t nbk, float* c, int64_t ldc, int mt, int nr,
                  bool first) {
  using I = typename V::I;
  using F = typename V::F;
  static_assert(T::kNR % V::kRows == 0);
  constexpr int kMR = T::kMR, kV = T::kNR / V::kRows, kNR = T::kNR, kR = V::kRows;
  // The output rows lie w.rows floats apart, out of cache: ask for them now.
  for (int t = 0; t < mt; ++t) {
    __builtin_prefetch(c + t * ldc, 1, 3);
    __builtin_prefetch(c + t * ldc + kNR - 1, 1, 3);
  }
  F facc[kMR][kV];
#pragma GCC unroll 8
  for (int t = 0; t < kMR; ++t) {
#pragma GCC unroll 4
    for (int v = 0; v < kV; ++v) facc[t][v] = V::zerof();
  }
  for (int64_t b = 0; b < nbk; ++b) {
    const uint8_t* xb = xp + b * T::kXBlockBytes;
    const uint8_t* wb = wp + b * T::kWBlockBytes;
    const auto* xs = reinterpret_cast<const float*>(xb + T::kXLevels);
    const auto* xcorr = reinterpret_cast<const int32_t*>(xs + kMR);
    const auto* xsum = xcorr + kMR;
    const auto* ws = reinterpret_cast<const float*>(wb + T::kWLevels);
    // The block's exact int32 sums: the correction plus every chain's widened sums.
    I isum[kMR][kV];
    [&]<int... C>(std::integer_sequence<int, C...>) { (add_chain<T, V, C>(wb, xb, xcorr, isum), ...); }
    (std::make_integer_sequence<int, T::kChains>{});
#pragma GCC unroll 8
    for (int t = 0; t < kMR; ++t) {
      const F sx = V::set1f(xs[t]);
#pragma GCC unroll 4
      for (int v = 0; v < kV; ++v) {
        const F s = V::mul(V::loadf(ws + kR * v), sx);
        facc[t][v] = V::fmadd(V::cvt(isum[t][v]), s, facc[t][v]);
      }
      if constexpr (T::kMins && T::kSubScales) {
        // q2_K: + (-dmin) * d_x * sum_h m_h * sum(x_q of half h), that sum exact from one vpmaddwd.
        const I hsum = V::set1(xsum[kMR + t]);
        const auto* half_mins = reinterpret_cast<const int32_t*>(ws + 3 * kNR);
#pragma GCC unroll 4
        for (int v = 0; v < kV; ++v) {
          const I m = V::madd(V::load(half_mins + kR * v), hsum);
          const F s = V::mul(V::loadf(ws + 4 * kNR + kR * v), sx);
          facc[t][v] = V::fmadd(V::cvt(m), s, facc[t][v]);
        }
      } else if constexpr (T::kMins) {
        // + m * d_x * sum(x_q)
        const F sxs = V::set1f(xs[t] * static_cast<float>(xsum[t]));
#pragma GCC unroll 4
        for (int v = 0; v < kV; ++v) facc[t][v] = V::fmadd(V::loadf(ws + kNR + kR * v), sxs, facc[t][v]);
      }
    }
  }
  V::template store_tile<kMR, kV>(facc, c, ldc, mt, nr, first);
}

// The int8 GEMM with tile T's packing and micro-kernel `kernel`.
template <class T, class Kernel>
void gemm(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool, Kernel kernel) {
  const int offset = level_offset(w.type);
  int8_gemm<T::kMR, T::kNR, T::kXBlockBytes, T::kWBlockBytes>(
      w, x, n, y, pool,
      [offset](const float* x, int64_t n, int64_t k, int64_t t0, uint8_t* dst) {
        pack_x_panel<T>(x, n, k, t0, offset, dst);
      },
      [offset](const WeightView& w, int64_t r0, int64_t b0, int64_t nbk, uint8_t* dst) {
        pack_w_panel<T>(w, r0, b0, nbk, offset, dst);
      },
      kernel);
}

template <class T, class V = Ymm>
void gemm(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  gemm<T>(w, x, n, y, pool, micro_kernel<T, V>);
}

}  // namespace

void matmul_q8_avx2(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
#if defined(KVSLIM_HAS_AVX512BW)
  // The AVX-512 levels: 16 rows per register. With VNNI (avx512, avx512bf16) only the halves
  // types come here; the VNNI and AMX kernels take the others. Tiles as measured fastest at
  // avx512f (kvslim_microbench matmul/*/8192x2048, one thread: q8_0 4x32 158 GFLOP/s against 131
  // for 4x16; q4_0 6x32 278 against 243 for 4x32; q4_K 6x32 236 against 225).
  switch (w.type) {
    case DType::Q3_K:
    case DType::Q6_K: return gemm<Tile<4, 4, 1, 4, false, true>, Zmm>(w, x, n, y, pool);
    case DType::Q2_K: return gemm<Tile<4, 4, 1, 4, true, true>, Zmm>(w, x, n, y, pool);
#if !defined(KVSLIM_HAS_AVX512VNNI)
    case DType::Q8_0:
    case DType::IQ4_NL:
    case DType::IQ4_XS: return gemm<Tile<4, 4, 2, 8, false>, Zmm>(w, x, n, y, pool);
    case DType::Q4_0: return gemm<Tile<6, 4, 1, 8, false>, Zmm>(w, x, n, y, pool);
    case DType::Q4_1:
    case DType::Q4_K: return gemm<Tile<6, 4, 1, 8, true>, Zmm>(w, x, n, y, pool);
    case DType::Q5_0:
    case DType::MXFP4: return gemm<Tile<6, 4, 1, 4, false>, Zmm>(w, x, n, y, pool);
    case DType::Q5_1:
    case DType::Q5_K: return gemm<Tile<6, 4, 1, 4, true>, Zmm>(w, x, n, y, pool);
#endif
    default: fail("matmul_q8: {} weights go to the AVX-512 int8 kernels", dtype_name(w.type));
  }
#else
  // Tiles (tokens, 8-row vectors) as measured fastest per scheme, all within 16 ymm registers.
  switch (w.type) {
    case DType::Q8_0:
    case DType::IQ4_NL:
    case DType::IQ4_XS: return gemm<Tile<4, 1, 2, 8, false> >(w, x, n, y, pool);
    case DType::Q4_0: return gemm<Tile<4, 2, 1, 8, false> >(w, x, n, y, pool);
    case DType::Q4_1:
    case DType::Q4_K: return gemm<Tile<4, 2, 1, 8, true> >(w, x, n, y, pool);
    case DType::Q5_0:
    case DType::MXFP4: return gemm<Tile<4, 2, 1, 4, false> >(w, x, n, y, pool);
    case DType::Q5_1:
    case DType::Q5_K: return gemm<Tile<4, 2, 1, 4, true> >(w, x, n, y, pool);
    case DType::Q3_K:
    case DType::Q6_K: return gemm<Tile<4, 2, 1, 4, false, true> >(w, x, n, y, pool);
    case DType::Q2_K: return gemm<Tile<4, 2, 1, 4, true, true> >(w, x, n, y, pool);
    default: fail("matmul_q8: {} weights have no int8 GEMM", dtype_name(w.type));
  }
#endif
}

#else

void matmul_q8_avx2(const WeightView&, const float*, int64_t, float*, ThreadPool&) {
  fail("matmul_q8: this level has no AVX2 int8 GEMM");
}

#endif

}  // namespace kvslim::KVSLIM_ISA_NS::detail
