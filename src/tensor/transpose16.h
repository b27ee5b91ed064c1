// In-register transposes of f32 tiles, shared by the GEMMs (matmul.cpp packs weight panels with
// them; the AMX int8 GEMM turns its [row][token] results into [token][row]): 16x16 in AVX-512
// registers, 8x8 in AVX2 ones.
#pragma once

#include "tensor/isa_begin.h"

#if defined(KVSLIM_HAS_AVX512F)
namespace kvslim::KVSLIM_ISA_NS::detail {

// In-register transpose of a 16x16 float tile (r[i] = row i on entry, column i on exit).
inline void transpose16x16_ps(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  __m512 u[4][4];  // u[g][j]: in 128-bit lane L, column 4L + j of rows 4g .. 4g + 3
  for (int g = 0; g < 4; ++g) {
    u[g][0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
    u[g][1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
    u[g][2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    u[g][3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[0][j], u[1][j], 0x44);
    const __m512 v1 = _mm512_shuffle_f32x4(u[0][j], u[1][j], 0xEE);
    const __m512 v2 = _mm512_shuffle_f32x4(u[2][j], u[3][j], 0x44);
    const __m512 v3 = _mm512_shuffle_f32x4(u[2][j], u[3][j], 0xEE);
    r[j] = _mm512_shuffle_f32x4(v0, v2, 0x88);
    r[4 + j] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
    r[8 + j] = _mm512_shuffle_f32x4(v1, v3, 0x88);
    r[12 + j] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
  }
}

}  // namespace kvslim::KVSLIM_ISA_NS::detail
#elif defined(KVSLIM_HAS_AVX2)
namespace kvslim::KVSLIM_ISA_NS::detail {

// In-register transpose of an 8x8 float tile (r[i] = row i on entry, column i on exit).
inline void transpose8x8_ps(__m256 r[8]) {
  __m256 t[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  __m256 u[2][4];  // u[g][j]: in 128-bit lane L, column 4L + j of rows 4g .. 4g + 3
  for (int g = 0; g < 2; ++g) {
    u[g][0] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
    u[g][1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
    u[g][2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    u[g][3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2f128_ps(u[0][j], u[1][j], 0x20);
    r[4 + j] = _mm256_permute2f128_ps(u[0][j], u[1][j], 0x31);
  }
}

}  // namespace kvslim::KVSLIM_ISA_NS::detail
#endif
