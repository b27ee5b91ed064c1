// Activation preparation and path dispatch of the block types' integer dot products.
#include "tensor/quant_dot.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/kernels.h"
#include "tensor/tensor_isa.h"
#include "util/error.h"

#include "tensor/isa_begin.h"
#include "tensor/simd.h"

namespace kvslim::KVSLIM_ISA_NS::detail {

void quantize_row_q8_k(const float* x, BlockQ8_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    float amax = 0, max = 0;
    for (int i = 0; i < kQK; ++i) {
      if (std::fabs(x[i]) > amax) {
        amax = std::fabs(x[i]);
        max = x[i];
      }
    }
    if (amax == 0) {
      std::memset(&y[b], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int i = 0; i < kQK; ++i)
      y[b].qs[i] = static_cast<int8_t>(std::min(127, static_cast<int>(std::nearbyint(iscale * x[i]))));
    for (int j = 0; j < 16; ++j) {
      int s = 0;
      for (int i = 0; i < 16; ++i) s += y[b].qs[16 * j + i];
      y[b].bsums[j] = static_cast<int16_t>(s);
    }
    y[b].d = 1 / iscale;
  }
}

size_t quant_activation_bytes(DType type, int64_t n) {
  if (dtype_block_size(type) == kQK) return static_cast<size_t>(n / kQK) * sizeof(BlockQ8_K) + 64;
  const size_t legacy = q8_activation_bytes(n) + align_up(static_cast<size_t>(n / kQ8Block) * 4, 64);
  if (type != DType::Q4_0) return legacy;
  const size_t groups = static_cast<size_t>(n / kQ8Block / 4);
  return legacy + groups * 128 + groups * 16 * (sizeof(int32_t) + sizeof(float));
}

namespace {

#if defined(KVSLIM_HAS_AVX512VNNI)
// The Q4_0 group layout of QuantActivations (q4_halves, q4_init, q4_scale) from the q8_0
// activations (q, d).
void prepare_q4_groups(const int8_t* q, const float* d, int64_t n, int8_t* halves, int32_t* init, float* scale) {
  for (int64_t g = 0; g < n / kQ8Block / 4; ++g) {
    const int8_t* blocks = q + g * 4 * kQ8Block;
    for (int j = 0; j < 4; ++j) {
      for (int k = 0; k < 4; ++k) scale[g * 16 + 4 * j + k] = d[g * 4 + j];
      std::memcpy(halves + g * 128 + 16 * j, blocks + j * kQ8Block, 16);
      std::memcpy(halves + g * 128 + 64 + 16 * j, blocks + j * kQ8Block + 16, 16);
      for (int k = 0; k < 4; ++k) {
        int32_t s = 0;
        for (int i = 0; i < 4; ++i) s += blocks[j * kQ8Block + 4 * k + i] + blocks[j * kQ8Block + 16 + 4 * k + i];
        init[g * 16 + 4 * j + k] = -8 * s;
      }
    }
  }
}
#endif

}  // namespace

QuantActivations prepare_quant_activations(DType type, const float* x, int64_t n, void* buffer) {
  QuantActivations a;
  a.type = type;
  a.n = n;
  if (dtype_block_size(type) == kQK) {
    auto* blocks = static_cast<BlockQ8_K*>(buffer);
    quantize_row_q8_k(x, blocks, n);
    a.k = blocks;
    return a;
  }
  // The q8_0 activation quantisation, plus each block's sum for the offsets and mins.
  const Q8Activations q8 = quantize_activations(x, n, buffer);
  auto* sums = reinterpret_cast<int32_t*>(static_cast<uint8_t*>(buffer) + q8_activation_bytes(n));
  for (int64_t b = 0; b < n / kQ8Block; ++b) {
    int32_t s = 0;
    for (int i = 0; i < kQ8Block; ++i) s += q8.q[b * kQ8Block + i];
    sums[b] = s;
  }
  a.q = q8.q;
  a.d = q8.scale;
  a.sum = sums;
  a.lane_corr = q8.lane_corr;
#if defined(KVSLIM_HAS_AVX512VNNI)
  // Only this level's q4_0 kernel (quant_dot_simd.cpp, dot_q4_0_512) reads the group layout.
  if (type == DType::Q4_0) {
    // 64-byte aligned: the legacy part's size is a multiple of 64, and groups * 128 is too.
    auto* halves = reinterpret_cast<int8_t*>(static_cast<uint8_t*>(buffer) + q8_activation_bytes(n) +
                                             align_up(static_cast<size_t>(n / kQ8Block) * 4, 64));
    auto* init = reinterpret_cast<int32_t*>(halves + (n / kQ8Block / 4) * 128);
    auto* scale = reinterpret_cast<float*>(init + (n / kQ8Block / 4) * 16);
    prepare_q4_groups(q8.q, q8.scale, n, halves, init, scale);
    a.q4_halves = halves;
    a.q4_init = init;
    a.q4_scale = scale;
  }
#endif
  return a;
}

void round_through_quant_activations(DType type, const float* x, int64_t n, float* out) {
  if (dtype_block_size(type) != kQK) {
    round_through_q8_activations(x, n, out);
    return;
  }
  thread_local Scratch scratch;
  auto* blocks = static_cast<BlockQ8_K*>(scratch.get(static_cast<size_t>(n / kQK) * sizeof(BlockQ8_K)));
  quantize_row_q8_k(x, blocks, n);
  for (int64_t i = 0; i < n; ++i) out[i] = blocks[i / kQK].d * static_cast<float>(blocks[i / kQK].qs[i % kQK]);
}

bool quant_kernel_available(QuantKernel path) {
  switch (path) {
    case QuantKernel::Auto:
    case QuantKernel::Scalar: return true;
    // The level being compiled decides (the active level is one the CPU runs).
    case QuantKernel::Avx2:
#if defined(KVSLIM_HAS_AVX2)
      return true;
#else
      return false;
#endif
    case QuantKernel::Vnni:
#if defined(KVSLIM_HAS_DPBUSD256)  // the levels with vpdpbusd on ymm (simd.h)
      return true;
#else
      return false;
#endif
    case QuantKernel::Neon:
#if defined(KVSLIM_HAS_NEON)
      return true;
#else
      return false;
#endif
  }
  return false;
}

QuantKernel resolve_quant_kernel(QuantKernel path) {
  if (path == QuantKernel::Auto) {
    if (quant_kernel_available(QuantKernel::Vnni)) return QuantKernel::Vnni;
    if (quant_kernel_available(QuantKernel::Avx2)) return QuantKernel::Avx2;
    if (quant_kernel_available(QuantKernel::Neon)) return QuantKernel::Neon;
    return QuantKernel::Scalar;
  }
  if (!quant_kernel_available(path)) {
    fail("the {} dot-product path is not available at the {} level",
         path == QuantKernel::Vnni   ? "VNNI"
         : path == QuantKernel::Neon ? "NEON"
                                     : "AVX2",
         isa_name(detail::dispatch_isa()));
  }
  return path;
}

void quant_dot_rows(const WeightView& w, const QuantActivations& xa, int64_t r0, int64_t r1, float* y,
                    QuantKernel path) {
  switch (path) {
    case QuantKernel::Vnni: quant_dot_rows_vnni(w, xa, r0, r1, y); return;
    case QuantKernel::Avx2: quant_dot_rows_avx2(w, xa, r0, r1, y); return;
    case QuantKernel::Neon: quant_dot_rows_neon(w, xa, r0, r1, y); return;
    default:
      for (int64_t r = r0; r < r1; ++r) y[r - r0] = quant_dot_row_scalar(w.type, w.row(r), xa);
      return;
  }
}

}  // namespace kvslim::KVSLIM_ISA_NS::detail
