// q8_0 quantisation: ggml's reference rounding for stored weights, and the activation
// quantisation used by the int8 matvec/matmul kernels.
#include <algorithm>
#include <cmath>

#include "tensor/kernels.h"
#include "tensor/tensor_isa.h"

#include "tensor/isa_begin.h"
#include "tensor/simd.h"

namespace kvslim::KVSLIM_ISA_NS::detail {

void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
  const int64_t nb = n / kQ8Block;
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQ8Block;
#if defined(KVSLIM_HAS_AVX512F) && defined(KVSLIM_HAS_AVX512BW) && defined(KVSLIM_HAS_AVX512VL)
    const __m512 v0 = _mm512_loadu_ps(xb);
    const __m512 v1 = _mm512_loadu_ps(xb + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].scale_f16 = fp32_to_fp16(d);
    const __m512 vid = _mm512_set1_ps(id);
    const __m512 half = _mm512_set1_ps(0.5f);
    const __m512 one = _mm512_set1_ps(1.0f);
    int8_t* q = y[b].q;
    for (int h = 0; h < 2; ++h) {
      const __m512 v = _mm512_mul_ps(h == 0 ? v0 : v1, vid);
      // roundf: half away from zero, computed exactly on |v|.
      const __m512 a = _mm512_abs_ps(v);
      const __m512 t = _mm512_roundscale_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      const __mmask16 up = _mm512_cmp_ps_mask(_mm512_sub_ps(a, t), half, _CMP_GE_OQ);
      __m512 r = _mm512_mask_add_ps(t, up, t, one);
      const __mmask16 neg = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ);
      r = _mm512_mask_sub_ps(r, neg, _mm512_setzero_ps(), r);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16 * h), _mm512_cvtsepi32_epi8(_mm512_cvttps_epi32(r)));
    }
#else
    float amax = 0.0f;
    for (int j = 0; j < kQ8Block; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].scale_f16 = fp32_to_fp16(d);
    for (int j = 0; j < kQ8Block; ++j) y[b].q[j] = static_cast<int8_t>(std::roundf(xb[j] * id));
#endif
  }
}

void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t n) {
  const int64_t nb = n / kQ8Block;
  for (int64_t b = 0; b < nb; ++b) {
    const float d = fp16_to_fp32(x[b].scale_f16);
    float* yb = y + b * kQ8Block;
#if defined(KVSLIM_HAS_AVX512F)
    const __m512 vd = _mm512_set1_ps(d);
    const __m128i* q = reinterpret_cast<const __m128i*>(x[b].q);
    _mm512_storeu_ps(yb, _mm512_mul_ps(vd, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(q)))));
    _mm512_storeu_ps(yb + 16, _mm512_mul_ps(vd, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(q + 1)))));
#else
    for (int j = 0; j < kQ8Block; ++j) yb[j] = d * static_cast<float>(x[b].q[j]);
#endif
  }
}

size_t q8_activation_bytes(int64_t n) {
  const size_t nb = static_cast<size_t>(n / kQ8Block);
  return align_up(static_cast<size_t>(n), 64) + align_up((nb + 16) * 4, 64) + align_up(static_cast<size_t>(n), 64);
}

Q8Activations quantize_activations(const float* x, int64_t n, void* buffer) {
  const int64_t nb = n / kQ8Block;
  auto* base = static_cast<uint8_t*>(buffer);
  Q8Activations out;
  out.n = n;
  out.q = reinterpret_cast<int8_t*>(base);
  out.scale = reinterpret_cast<float*>(base + align_up(static_cast<size_t>(n), 64));
  out.lane_corr = reinterpret_cast<int32_t*>(base + align_up(static_cast<size_t>(n), 64) +
                                             align_up(static_cast<size_t>(nb + 16) * 4, 64));
  for (int64_t b = nb; b < nb + 16; ++b) out.scale[b] = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQ8Block;
    int8_t* q = out.q + b * kQ8Block;
    int32_t* corr = out.lane_corr + b * 8;
#if defined(KVSLIM_HAS_AVX512F) && defined(KVSLIM_HAS_AVX512BW) && defined(KVSLIM_HAS_AVX512VL)
    const __m512 v0 = _mm512_loadu_ps(xb);
    const __m512 v1 = _mm512_loadu_ps(xb + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    out.scale[b] = d;
    const __m512 vid = _mm512_set1_ps(id);
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, vid));
    const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, vid));
    const __m128i b0 = _mm512_cvtsepi32_epi8(q0);
    const __m128i b1 = _mm512_cvtsepi32_epi8(q1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q), b0);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), b1);
    // Sums of 4 consecutive values: madd of pairs then horizontal pairs.
    const __m256i all = _mm256_set_m128i(b1, b0);
    const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), all);   // pairs
    const __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(-128));  // quads * -128
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(corr), s32);
#else
    float amax = 0.0f;
    for (int j = 0; j < kQ8Block; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    out.scale[b] = d;
    for (int j = 0; j < kQ8Block; ++j) {
      float v = std::nearbyint(xb[j] * id);
      v = std::min(127.0f, std::max(-127.0f, v));
      q[j] = static_cast<int8_t>(v);
    }
    for (int l = 0; l < 8; ++l) corr[l] = -128 * (q[4 * l] + q[4 * l + 1] + q[4 * l + 2] + q[4 * l + 3]);
#endif
  }
  return out;
}

void round_through_q8_activations(const float* x, int64_t n, float* out) {
  thread_local Scratch scratch;
  const Q8Activations a = quantize_activations(x, n, scratch.get(q8_activation_bytes(n)));
  for (int64_t i = 0; i < n; ++i) out[i] = a.scale[i / kQ8Block] * static_cast<float>(a.q[i]);
}

}  // namespace kvslim::KVSLIM_ISA_NS::detail
