// Internal: the x86 intrinsics header (plus the one shared horizontal-sum helper), with GCC 12's false -Wmaybe-uninitialized warnings from
// its AVX-512 intrinsics (`__Y = __Y` in the headers) silenced for the including file.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace kvslim::detail {

#if defined(__AVX__)
// The sum of the 8 lanes of v (one copy for every kernel that reduces a 256-bit accumulator;
// 512-bit accumulators use _mm512_reduce_add_ps).
inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
#endif

}  // namespace kvslim::detail
