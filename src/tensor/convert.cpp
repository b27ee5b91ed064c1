// Bulk conversions between f32 and the stored types (dtype.h's convert_from_f32 / convert_to_f32).
// Compiled once per instruction-set level (tensor/isa.h).
#include <cstring>

#include "tensor/dtype.h"
#include "tensor/kernels.h"
#include "tensor/tensor_isa.h"
#include "util/error.h"

#include "tensor/isa_begin.h"
#include "tensor/simd.h"

namespace kvslim::KVSLIM_ISA_NS {

// ---------------------------------------------------------------------------------------------
// Bulk conversions.

namespace {

void f32_to_f16_row(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
#if defined(KVSLIM_HAS_AVX512F)
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
#elif defined(KVSLIM_HAS_F16C) && defined(KVSLIM_HAS_AVX)
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
#elif defined(KVSLIM_HAS_NEON)
  for (; i + 4 <= n; i += 4) vst1_u16(dst + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + i))));
#endif
  for (; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

void f16_to_f32_row(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(KVSLIM_HAS_AVX512F)
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
  }
#elif defined(KVSLIM_HAS_F16C) && defined(KVSLIM_HAS_AVX)
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
#elif defined(KVSLIM_HAS_NEON)
  for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(src + i))));
#endif
  for (; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}

void f32_to_bf16_row(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
#if defined(KVSLIM_HAS_AVX512F)
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i inf = _mm512_set1_epi32(0x7f800000);
  const __m512i bias = _mm512_set1_epi32(0x7fff);
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i quiet = _mm512_set1_epi32(0x40);
  for (; i + 16 <= n; i += 16) {
    const __m512i x = _mm512_castps_si512(_mm512_loadu_ps(src + i));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, abs_mask), inf);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), one);
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, bias), lsb), 16);
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(x, 16), quiet));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtepi32_epi16(r));
  }
#endif
  for (; i < n; ++i) dst[i] = fp32_to_bf16(src[i]);
}

void bf16_to_f32_row(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(KVSLIM_HAS_AVX512F)
  for (; i + 16 <= n; i += 16) {
    const __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
  }
#elif defined(KVSLIM_HAS_AVX2)
  for (; i + 8 <= n; i += 8) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
  }
#elif defined(KVSLIM_HAS_NEON)
  for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(src + i), 16)));
#endif
  for (; i < n; ++i) dst[i] = bf16_to_fp32(src[i]);
}

}  // namespace

void convert_from_f32(const float* src, DType type, void* dst, int64_t n) {
  if (n < 0) fail("convert_from_f32: negative count {}", n);
  switch (type) {
    case DType::F32:
      if (n > 0) std::memmove(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::F16: f32_to_f16_row(src, static_cast<uint16_t*>(dst), n); return;
    case DType::BF16: f32_to_bf16_row(src, static_cast<uint16_t*>(dst), n); return;
    case DType::Q8_0:
      if (n % kQ8Block != 0) fail("convert_from_f32: q8_0 needs a multiple of 32 values, got {}", n);
      detail::quantize_row_q8_0(src, static_cast<BlockQ8_0*>(dst), n);
      return;
    default:
      if (n % dtype_block_size(type) != 0)
        fail("convert_from_f32: {} needs a multiple of {} values, got {}", dtype_name(type), dtype_block_size(type), n);
      detail::quantize_row_blocks(type, src, dst, n);
      return;
  }
  fail("convert_from_f32: invalid DType {}", static_cast<int>(type));
}

void convert_to_f32(DType type, const void* src, float* dst, int64_t n) {
  if (n < 0) fail("convert_to_f32: negative count {}", n);
  switch (type) {
    case DType::F32:
      if (n > 0) std::memmove(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::F16: f16_to_f32_row(static_cast<const uint16_t*>(src), dst, n); return;
    case DType::BF16: bf16_to_f32_row(static_cast<const uint16_t*>(src), dst, n); return;
    case DType::Q8_0:
      if (n % kQ8Block != 0) fail("convert_to_f32: q8_0 needs a multiple of 32 values, got {}", n);
      detail::dequantize_row_q8_0(static_cast<const BlockQ8_0*>(src), dst, n);
      return;
    default:
      if (n % dtype_block_size(type) != 0)
        fail("convert_to_f32: {} needs a multiple of {} values, got {}", dtype_name(type), dtype_block_size(type), n);
      detail::dequantize_row_blocks(type, src, dst, n);
      return;
  }
  fail("convert_to_f32: invalid DType {}", static_cast<int>(type));
}

}  // namespace kvslim::KVSLIM_ISA_NS
