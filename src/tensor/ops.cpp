// Element-wise kernels: rmsnorm, softmax, swiglu, add, axpy, dot, rope and the threshold scan of
// the sparse selectors. Compiled once per instruction-set level (tensor/isa.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "tensor/ops.h"
#include "tensor/tensor_isa.h"
#include "util/error.h"

#include "tensor/isa_begin.h"
#include "tensor/simd.h"

namespace kvslim::KVSLIM_ISA_NS {
namespace {

// exp(x) for 16 floats: x = n ln2 + r, |r| <= ln2/2, e^r by Cephes' degree-7 polynomial,
// 2^n applied with scalef (exact, handles overflow to inf and gradual underflow). About 1 ulp.
#if defined(KVSLIM_HAS_AVX512F)
inline __m512 exp512(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);  // NaN passes through (second operand)
  x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 r2 = _mm512_mul_ps(r, r);
  p = _mm512_fmadd_ps(p, r2, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}
#endif

#if defined(KVSLIM_HAS_AVX2) && defined(KVSLIM_HAS_FMA)
inline __m256 exp256(__m256 x) {
  // Results below FLT_MIN flush to 0 and above FLT_MAX go to inf (no subnormals on this path).
  const __m256 underflow = _mm256_cmp_ps(x, _mm256_set1_ps(-87.33654f), _CMP_LT_OQ);
  const __m256 overflow = _mm256_cmp_ps(x, _mm256_set1_ps(88.72283f), _CMP_GT_OQ);
  x = _mm256_max_ps(_mm256_set1_ps(-87.33654f), x);  // NaN passes through (second operand)
  x = _mm256_min_ps(_mm256_set1_ps(88.72283f), x);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 r2 = _mm256_mul_ps(r, r);
  p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^n: n in [-126, 128]; split as 2^(n/2) * 2^(n - n/2) so both factors are normal.
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i h = _mm256_srai_epi32(ni, 1);
  const __m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h, _mm256_set1_epi32(127)), 23));
  const __m256 f2 =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, h), _mm256_set1_epi32(127)), 23));
  const __m256 res = _mm256_mul_ps(_mm256_mul_ps(p, f1), f2);
  return _mm256_blendv_ps(_mm256_andnot_ps(underflow, res), _mm256_set1_ps(INFINITY), overflow);
}
#endif

#if defined(KVSLIM_HAS_NEON)
// exp256's steps on 4 floats (round to nearest even, fused multiply-adds, the same constants), so
// the NEON levels give exp256's bits: about 1 ulp, below FLT_MIN 0, above FLT_MAX inf.
inline float32x4_t exp128(float32x4_t x) {
  const uint32x4_t underflow = vcltq_f32(x, vdupq_n_f32(-87.33654f));
  const uint32x4_t overflow = vcgtq_f32(x, vdupq_n_f32(88.72283f));
  x = vmaxq_f32(vdupq_n_f32(-87.33654f), x);  // NaN passes through (FMAX returns it)
  x = vminq_f32(vdupq_n_f32(88.72283f), x);
  const float32x4_t n = vrndnq_f32(vmulq_n_f32(x, 1.44269504088896341f));
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));  // x - n * c, one rounding
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
  p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
  p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
  p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
  // 2^n as two normal factors, as exp256.
  const int32x4_t ni = vcvtq_s32_f32(n);
  const int32x4_t h = vshrq_n_s32(ni, 1);
  const float32x4_t f1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(h, vdupq_n_s32(127)), 23));
  const float32x4_t f2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vsubq_s32(ni, h), vdupq_n_s32(127)), 23));
  const float32x4_t res = vmulq_f32(vmulq_f32(p, f1), f2);
  return vbslq_f32(overflow, vdupq_n_f32(INFINITY), vbslq_f32(underflow, vdupq_n_f32(0.0f), res));
}
#endif

}  // namespace

void rmsnorm(const float* x, const float* weight, float* y, int64_t n, float eps) {
  if (n <= 0) return;
  int64_t i = 0;
  double ss = 0.0;
#if defined(KVSLIM_HAS_AVX512F)
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  for (; i + 32 <= n; i += 32) {
    const __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
    a0 = _mm512_fmadd_ps(v0, v0, a0);
    a1 = _mm512_fmadd_ps(v1, v1, a1);
  }
  ss = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
#elif defined(KVSLIM_HAS_AVX2) && defined(KVSLIM_HAS_FMA)
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  for (; i + 16 <= n; i += 16) {
    const __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
    a0 = _mm256_fmadd_ps(v0, v0, a0);
    a1 = _mm256_fmadd_ps(v1, v1, a1);
  }
  ss = detail::hsum256(_mm256_add_ps(a0, a1));
#elif defined(KVSLIM_HAS_NEON)
  float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0), a2 = vdupq_n_f32(0), a3 = vdupq_n_f32(0);
  for (; i + 16 <= n; i += 16) {
    const float32x4_t v0 = vld1q_f32(x + i), v1 = vld1q_f32(x + i + 4);
    const float32x4_t v2 = vld1q_f32(x + i + 8), v3 = vld1q_f32(x + i + 12);
    a0 = vfmaq_f32(a0, v0, v0);
    a1 = vfmaq_f32(a1, v1, v1);
    a2 = vfmaq_f32(a2, v2, v2);
    a3 = vfmaq_f32(a3, v3, v3);
  }
  ss = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
#endif
  for (; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  i = 0;
#if defined(KVSLIM_HAS_AVX512F)
  const __m512 vs = _mm512_set1_ps(scale);
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vs), _mm512_loadu_ps(weight + i)));
  }
#elif defined(KVSLIM_HAS_AVX2)
  const __m256 vs = _mm256_set1_ps(scale);
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(weight + i)));
  }
#elif defined(KVSLIM_HAS_NEON)
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_f32(vmulq_n_f32(vld1q_f32(x + i), scale), vld1q_f32(weight + i)));
#endif
  for (; i < n; ++i) y[i] = x[i] * scale * weight[i];
}

void softmax_inplace(float* x, int64_t n, float sink) {
  if (n <= 0) return;
  float mx = sink;  // -inf without a sink
  int64_t i = 0;
#if defined(KVSLIM_HAS_AVX512F)
  __m512 vm = _mm512_set1_ps(mx);
  for (; i + 16 <= n; i += 16) vm = _mm512_max_ps(vm, _mm512_loadu_ps(x + i));
  mx = _mm512_reduce_max_ps(vm);
#elif defined(KVSLIM_HAS_AVX2)
  // Vectors here too: the scalar loop below alone (one dependent max per score) took a tenth of
  // the AVX2 decode attention's time at 4096 tokens of context.
  __m256 vm = _mm256_set1_ps(mx);
  for (; i + 8 <= n; i += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + i));
  mx = detail::hmax256(vm);
#elif defined(KVSLIM_HAS_NEON)
  float32x4_t vm0 = vdupq_n_f32(mx), vm1 = vm0;  // two chains: a max waits on the one before
  for (; i + 8 <= n; i += 8) {
    vm0 = vmaxq_f32(vm0, vld1q_f32(x + i));
    vm1 = vmaxq_f32(vm1, vld1q_f32(x + i + 4));
  }
  mx = vmaxvq_f32(vmaxq_f32(vm0, vm1));
#endif
  for (; i < n; ++i) mx = std::max(mx, x[i]);
  if (mx == -std::numeric_limits<float>::infinity()) {
    // Every entry is -inf (fully masked): define the result as uniform rather than NaN.
    const float u = 1.0f / static_cast<float>(n);
    for (int64_t j = 0; j < n; ++j) x[j] = u;
    return;
  }
  double sum = 0.0;
  i = 0;
#if defined(KVSLIM_HAS_AVX512F)
  {
    const __m512 vmax = _mm512_set1_ps(mx);
    __m512 vsum = _mm512_setzero_ps();
    for (; i + 16 <= n; i += 16) {
      const __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + i), vmax));
      _mm512_storeu_ps(x + i, e);
      vsum = _mm512_add_ps(vsum, e);
    }
    if (i < n) {
      const __mmask16 m = detail::first_lanes16(n - i);
      const __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vmax));
      _mm512_mask_storeu_ps(x + i, m, e);
      vsum = _mm512_add_ps(vsum, _mm512_maskz_mov_ps(m, e));
      i = n;
    }
    sum = _mm512_reduce_add_ps(vsum);
  }
#elif defined(KVSLIM_HAS_AVX2) && defined(KVSLIM_HAS_FMA)
  {
    const __m256 vmax = _mm256_set1_ps(mx);
    __m256 vsum = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) {
      const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax));
      _mm256_storeu_ps(x + i, e);
      vsum = _mm256_add_ps(vsum, e);
    }
    sum = detail::hsum256(vsum);
  }
#elif defined(KVSLIM_HAS_NEON)
  {
    const float32x4_t vmax = vdupq_n_f32(mx);
    float32x4_t vsum = vdupq_n_f32(0.0f);
    for (; i + 4 <= n; i += 4) {
      const float32x4_t e = exp128(vsubq_f32(vld1q_f32(x + i), vmax));
      vst1q_f32(x + i, e);
      vsum = vaddq_f32(vsum, e);
    }
    sum = vaddvq_f32(vsum);
  }
#endif
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  if (sink > -std::numeric_limits<float>::infinity()) sum += std::exp(double(sink) - mx);
  const float inv = static_cast<float>(1.0 / sum);
  i = 0;
#if defined(KVSLIM_HAS_AVX512F)
  const __m512 vinv = _mm512_set1_ps(inv);
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), vinv));
#elif defined(KVSLIM_HAS_AVX2)
  const __m256 vinv = _mm256_set1_ps(inv);
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv));
#elif defined(KVSLIM_HAS_NEON)
  for (; i + 4 <= n; i += 4) vst1q_f32(x + i, vmulq_n_f32(vld1q_f32(x + i), inv));
#endif
  for (; i < n; ++i) x[i] *= inv;
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
#if defined(KVSLIM_HAS_AVX512F)
  const __m512 one = _mm512_set1_ps(1.0f);
  for (; i < n; i += 16) {
    const __mmask16 m = detail::first_lanes16(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 u = _mm512_maskz_loadu_ps(m, up + i);
    const __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 s = _mm512_div_ps(g, _mm512_add_ps(one, e));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(s, u));
  }
#elif defined(KVSLIM_HAS_AVX2) && defined(KVSLIM_HAS_FMA)
  const __m256 one = _mm256_set1_ps(1.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), g));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
  }
#elif defined(KVSLIM_HAS_NEON)
  for (; i + 4 <= n; i += 4) {
    const float32x4_t g = vld1q_f32(gate + i);
    const float32x4_t e = exp128(vnegq_f32(g));
    vst1q_f32(out + i, vmulq_f32(vdivq_f32(g, vaddq_f32(vdupq_n_f32(1.0f), e)), vld1q_f32(up + i)));
  }
#endif
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void add_inplace(float* y, const float* x, int64_t n) {
  int64_t i = 0;
#if defined(KVSLIM_HAS_AVX512F)
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_loadu_ps(y + i), _mm512_loadu_ps(x + i)));
#elif defined(KVSLIM_HAS_AVX)
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
#elif defined(KVSLIM_HAS_NEON)
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vaddq_f32(vld1q_f32(y + i), vld1q_f32(x + i)));
#endif
  for (; i < n; ++i) y[i] += x[i];
}

void axpy(float a, const float* x, float* y, int64_t n) {
  int64_t i = 0;
#if defined(KVSLIM_HAS_AVX512F)
  const __m512 va = _mm512_set1_ps(a);
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
#elif defined(KVSLIM_HAS_AVX2) && defined(KVSLIM_HAS_FMA)
  const __m256 va = _mm256_set1_ps(a);
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
#elif defined(KVSLIM_HAS_NEON)
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), vld1q_f32(x + i), a));
#endif
  for (; i < n; ++i) y[i] += a * x[i];
}

float dot(const float* a, const float* b, int64_t n) {
  int64_t i = 0;
  float s = 0.0f;
#if defined(KVSLIM_HAS_AVX512F)
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), a0);
    a1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), a1);
    a2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 32), _mm512_loadu_ps(b + i + 32), a2);
    a3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 48), _mm512_loadu_ps(b + i + 48), a3);
  }
  for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), a0);
  if (i < n) {
    const __mmask16 m = detail::first_lanes16(n - i);
    a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), a1);
    i = n;
  }
  s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
#elif defined(KVSLIM_HAS_AVX2) && defined(KVSLIM_HAS_FMA)
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), a1);
  }
  s = detail::hsum256(_mm256_add_ps(a0, a1));
#elif defined(KVSLIM_HAS_NEON)
  float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0), a2 = vdupq_n_f32(0), a3 = vdupq_n_f32(0);
  for (; i + 16 <= n; i += 16) {
    a0 = vfmaq_f32(a0, vld1q_f32(a + i), vld1q_f32(b + i));
    a1 = vfmaq_f32(a1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
    a2 = vfmaq_f32(a2, vld1q_f32(a + i + 8), vld1q_f32(b + i + 8));
    a3 = vfmaq_f32(a3, vld1q_f32(a + i + 12), vld1q_f32(b + i + 12));
  }
  for (; i + 4 <= n; i += 4) a0 = vfmaq_f32(a0, vld1q_f32(a + i), vld1q_f32(b + i));
  s = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
#endif
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

void gelu_tanh_gated(const float* gate, const float* up, float* out, int64_t n) {
  constexpr float kSqrt2OverPi = 0.79788456080286535588f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    out[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + 0.044715f * x * x))) * up[i];
  }
}

void rope_yarn_corr_dims(int n_rot, int original_context, float base, float beta_fast, float beta_slow, float dims[2]) {
  // The rotary dim whose wavelength spans original_context / beta turns.
  auto dim_of = [&](float beta) {
    return float(n_rot) * std::log(float(original_context) / (beta * 2.0f * float(M_PI))) / (2.0f * std::log(base));
  };
  dims[0] = std::max(0.0f, std::floor(dim_of(beta_fast)));
  dims[1] = std::min(float(n_rot - 1), std::ceil(dim_of(beta_slow)));
}

void rope_inplace(float* x, int n_heads, int64_t pos, const RopeConfig& config) {
  const int head_dim = config.head_dim;
  const int n_rot = config.n_rot;
  if (head_dim <= 0 || n_rot <= 0 || n_rot > head_dim || n_rot % 2 != 0) {
    fail("rope: invalid head_dim {} / n_rot {} (n_rot must be even and in (0, head_dim])", head_dim, n_rot);
  }
  constexpr int kMaxPairs = 512;
  const int half = n_rot / 2;
  if (half > kMaxPairs) fail("rope: n_rot {} too large (max {})", n_rot, 2 * kMaxPairs);
  float cs[kMaxPairs], sn[kMaxPairs];
  const double base = static_cast<double>(config.base);
  const bool yarn = config.ext_factor != 0.0f;
  float corr[2] = {0.0f, 0.0f};
  float mscale = config.attn_factor;
  if (yarn) {
    rope_yarn_corr_dims(n_rot, config.original_context, config.base, config.beta_fast, config.beta_slow, corr);
    mscale *= 1.0f + 0.1f * std::log(1.0f / config.freq_scale);
  }
  for (int i = 0; i < half; ++i) {
    double theta = static_cast<double>(pos) * config.freq_scale * std::pow(base, -2.0 * i / n_rot);  // interpolated
    if (config.freq_factors != nullptr) theta /= static_cast<double>(config.freq_factors[i]);
    if (yarn) {
      double extrap = static_cast<double>(pos) * std::pow(base, -2.0 * i / n_rot);
      if (config.freq_factors != nullptr) extrap /= static_cast<double>(config.freq_factors[i]);
      // ggml's rope_yarn_ramp(low, high, i0) with i0 = 2i: 1 - clamp((i - low) / max(0.001, high - low), 0, 1).
      const float y = (float(i) - corr[0]) / std::max(0.001f, corr[1] - corr[0]);
      const double mix = double(1.0f - std::min(1.0f, std::max(0.0f, y))) * config.ext_factor;
      theta = theta * (1.0 - mix) + extrap * mix;
    }
    cs[i] = static_cast<float>(std::cos(theta)) * mscale;
    sn[i] = static_cast<float>(std::sin(theta)) * mscale;
  }
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    if (config.neox) {
      for (int i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * cs[i] - b * sn[i];
        v[i + half] = a * sn[i] + b * cs[i];
      }
    } else {
      for (int i = 0; i < half; ++i) {
        const float a = v[2 * i], b = v[2 * i + 1];
        v[2 * i] = a * cs[i] - b * sn[i];
        v[2 * i + 1] = a * sn[i] + b * cs[i];
      }
    }
  }
}

int64_t indices_at_least(const float* values, int64_t n, float threshold, int32_t* out) {
  int64_t m = 0, i = 0;
#if defined(KVSLIM_HAS_AVX512F)
  const __m512 t = _mm512_set1_ps(threshold);
  __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i step = _mm512_set1_epi32(16);
  for (; i + 16 <= n; i += 16) {
    const __mmask16 take = _mm512_cmp_ps_mask(_mm512_loadu_ps(values + i), t, _CMP_GE_OQ);
    _mm512_storeu_si512(out + m, _mm512_maskz_compress_epi32(take, idx));
    m += _mm_popcnt_u32(take);
    idx = _mm512_add_epi32(idx, step);
  }
#endif
  for (; i < n; ++i) {
    if (values[i] >= threshold) out[m++] = static_cast<int32_t>(i);
  }
  return m;
}

// fp-contract=off: a fused out + q * x would round once where the other levels (and the scalar
// tail) round twice, and the bounds rank pages, so every level must give the same bits.
__attribute__((optimize("fp-contract=off"))) void minmax_logit_bounds(const float* lo, const float* hi, int64_t stride,
                                                                      int channels, const float* q, int64_t n,
                                                                      float* out) {
  std::fill(out, out + n, 0.0f);
  for (int c = 0; c < channels; ++c) {
    const float qc = q[c];
    // max(qc * lo, qc * hi) is qc * hi for qc >= 0 and qc * lo otherwise: lo <= hi, and a product
    // with a fixed qc rounds monotonically (equal products are equal floats; a zero product adds
    // nothing to a sum that started at +0). So one of the two arrays is read, and no max taken.
    const float* x = (qc >= 0.0f ? hi : lo) + c * stride;
    int64_t p = 0;
#if defined(KVSLIM_HAS_AVX512F)
    const __m512 vq = _mm512_set1_ps(qc);
    for (; p + 16 <= n; p += 16)
      _mm512_storeu_ps(out + p, _mm512_add_ps(_mm512_loadu_ps(out + p), _mm512_mul_ps(vq, _mm512_loadu_ps(x + p))));
#elif defined(KVSLIM_HAS_AVX)
    const __m256 vq = _mm256_set1_ps(qc);
    for (; p + 8 <= n; p += 8)
      _mm256_storeu_ps(out + p, _mm256_add_ps(_mm256_loadu_ps(out + p), _mm256_mul_ps(vq, _mm256_loadu_ps(x + p))));
#elif defined(KVSLIM_HAS_NEON)
    for (; p + 4 <= n; p += 4) vst1q_f32(out + p, vaddq_f32(vld1q_f32(out + p), vmulq_n_f32(vld1q_f32(x + p), qc)));
#endif
    for (; p < n; ++p) out[p] += qc * x[p];
  }
}

}  // namespace kvslim::KVSLIM_ISA_NS
