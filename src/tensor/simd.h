// Helpers for kernel files, inside the instruction-set level being compiled: include after
// tensor/isa_begin.h. Defines them in kvslim::KVSLIM_ISA_NS::detail.
#pragma once

#include "tensor/dtype.h"
#include "tensor/isa_begin.h"

#if defined(KVSLIM_HAS_AVX512F) && defined(KVSLIM_HAS_AVX512BW) && defined(KVSLIM_HAS_AVX512BF16)
// BF16 weights are multiplied with vdpbf16ps (matvec.cpp, matmul.cpp) against x rounded to
// bf16 pairs.
#define KVSLIM_BF16_DOT 1
#endif

namespace kvslim::KVSLIM_ISA_NS::detail {

#if defined(KVSLIM_HAS_AVX)
// The sum of the 8 lanes of v (one copy for every kernel that reduces a 256-bit accumulator;
// 512-bit accumulators use _mm512_reduce_add_ps).
inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
#endif

}  // namespace kvslim::KVSLIM_ISA_NS::detail

namespace kvslim::KVSLIM_ISA_NS {

// IEEE half <-> float, one value: one instruction where the level has F16C (the baseline's
// kvslim::fp16_to_fp32 is the portable bit-exact version). Kernel code calls these unqualified.
inline float fp16_to_fp32(uint16_t h) {
#if defined(KVSLIM_HAS_F16C)
  return _cvtsh_ss(h);
#else
  return ::kvslim::fp16_to_fp32(h);
#endif
}

inline uint16_t fp32_to_fp16(float f) {
#if defined(KVSLIM_HAS_F16C)
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#else
  return ::kvslim::fp32_to_fp16(f);
#endif
}

}  // namespace kvslim::KVSLIM_ISA_NS
