// Helpers for kernel files, inside the instruction-set level being compiled: include after
// tensor/isa_begin.h. Defines them in kvslim::KVSLIM_ISA_NS::detail.
#pragma once

#include "tensor/dtype.h"
#include "tensor/isa_begin.h"

#if defined(KVSLIM_HAS_AVX512F) && defined(KVSLIM_HAS_AVX512BW) && defined(KVSLIM_HAS_AVX512BF16)
// BF16 weights are multiplied with vdpbf16ps in decode (matvec.cpp) against x rounded to bf16
// pairs; prefill widens them to f32.
#define KVSLIM_BF16_DOT 1
#endif

namespace kvslim::KVSLIM_ISA_NS::detail {

#if defined(KVSLIM_HAS_AVX512F)
// The mask of the first n of 16 lanes, for the tails of masked loads and stores: all 16 from
// n >= 16 on, none for n <= 0.
inline __mmask16 first_lanes16(int64_t n) {
  if (n >= 16) return static_cast<__mmask16>(0xffff);
  return n <= 0 ? static_cast<__mmask16>(0) : static_cast<__mmask16>((1u << n) - 1);
}
#endif

#if defined(KVSLIM_HAS_AVX)
// The sum of the 8 lanes of v (one copy for every kernel that reduces a 256-bit accumulator;
// 512-bit accumulators use _mm512_reduce_add_ps).
inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The largest of the 8 lanes of v.
inline float hmax256(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}
#endif

#if defined(KVSLIM_HAS_AVX)
// Asks for the cache line `ahead` bytes past `p` to be brought into L2 (prefetcht1): the
// matvecs' software prefetch of the weights they stream. Into L2 rather than L1 (t0) because a
// core tracks far fewer L1 misses in flight than L2 misses, and a decode is one long stream
// from memory: on a Sapphire Rapids-class VM, 2 threads, t1 at 4 KiB ahead decoded f16 +19%,
// q8_0 +23%, q4_K_M +16%, q6_K +22% and iq4_nl +8% faster than t0 (AVX2 level alike; only
// q4_0's 512-bit loop kept t0, see quant_dot_simd.cpp). AMD before Zen 4 treats t1 as t0.
// uintptr_t arithmetic: the address may lie past the matrix; prefetches never fault.
inline void prefetch_l2(const void* p, size_t ahead) {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(p) + ahead), _MM_HINT_T1);
}
#endif

#if (defined(KVSLIM_HAS_AVX512VNNI) && defined(KVSLIM_HAS_AVX512VL)) || defined(KVSLIM_HAS_AVXVNNI)
// vpdpbusd on ymm: acc + the sum of 4 consecutive u8 * s8 products per int32 lane, exact (no
// int16 saturation as in maddubs). AVX-512 VNNI's EVEX form or AVX-VNNI's VEX form; in the tests'
// emulated AVX-VNNI build, the same integers from AVX2 instructions.
#define KVSLIM_HAS_DPBUSD256 1
inline __m256i dpbusd256(__m256i acc, __m256i u, __m256i s) {
#if defined(KVSLIM_HAS_AVX512VNNI)
  return _mm256_dpbusd_epi32(acc, u, s);
#elif defined(KVSLIM_AVXVNNI_EMULATED)
  // Bytes widened to int16 (u unsigned, s signed), multiplied and added in pairs (vpmaddwd):
  // lane i of lo holds bytes 2i, 2i + 1 of the low half, of hi of the high half. hadd adds
  // neighbouring pairs within each 128-bit half; the 64-bit permute restores the lane order.
  const __m256i lo = _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm256_castsi256_si128(u)),
                                       _mm256_cvtepi8_epi16(_mm256_castsi256_si128(s)));
  const __m256i hi = _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm256_extracti128_si256(u, 1)),
                                       _mm256_cvtepi8_epi16(_mm256_extracti128_si256(s, 1)));
  return _mm256_add_epi32(acc, _mm256_permute4x64_epi64(_mm256_hadd_epi32(lo, hi), 0xD8));
#else
  return _mm256_dpbusd_avx_epi32(acc, u, s);
#endif
}
#endif

#if defined(KVSLIM_HAS_NEON)
// acc + the products of 16 int8 pairs, in 4 int32 lanes whose total is exact (sdot: 4 products
// per lane; without dotprod: widening multiplies, pairs added into the lanes).
inline int32x4_t neon_dot_s8(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(KVSLIM_HAS_NEON_DOTPROD)
  return vdotq_s32(acc, a, b);
#else
  // One product per int16 lane (-128 * -128 does not fit two).
  acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
  return vpadalq_s16(acc, vmull_s8(vget_high_s8(a), vget_high_s8(b)));
#endif
}
#endif

}  // namespace kvslim::KVSLIM_ISA_NS::detail

namespace kvslim::KVSLIM_ISA_NS {

// IEEE half <-> float, one value: one instruction where the level has F16C (the baseline's
// kvslim::fp16_to_fp32 is the portable bit-exact version). Kernel code calls these unqualified.
inline float fp16_to_fp32(uint16_t h) {
#if defined(KVSLIM_HAS_F16C)
  return _cvtsh_ss(h);
#elif defined(KVSLIM_HAS_NEON)
  return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
#else
  return ::kvslim::fp16_to_fp32(h);
#endif
}

inline uint16_t fp32_to_fp16(float f) {
#if defined(KVSLIM_HAS_F16C)
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#elif defined(KVSLIM_HAS_NEON)
  return vget_lane_u16(vreinterpret_u16_f16(vcvt_f16_f32(vdupq_n_f32(f))), 0);
#else
  return ::kvslim::fp32_to_fp16(f);
#endif
}

}  // namespace kvslim::KVSLIM_ISA_NS
