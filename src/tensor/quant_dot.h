// Internal: integer dot products of block-quantised weight rows (q4_0 .. q6_k) with quantised
// activations, the inner loop of matvec for those types.
//
// Activations are quantised the way each format's dot product expects: blocks of 32 int8 with
// an f32 scale (d = amax / 127, as for q8_0) for the legacy types, q8_K super-blocks (256 int8,
// f32 scale, per-16 sums) for the K-quants. Weights are unpacked in registers to unsigned levels
// q (0 .. 2^bits - 1); the products sum(q * x) are exact int32, and each format's offset or min
// (q - 8, q - 32, - dmin * m ...) is applied once per (sub-)block through the activation sums.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"
#include "tensor/ops.h"

namespace kvslim::detail {

// Activations prepared for one weight type.
struct QuantActivations {
  DType type = DType::F32;  // the weight type they were prepared for
  int64_t n = 0;
  // Legacy types: n / 32 blocks.
  const int8_t* q = nullptr;
  const float* d = nullptr;
  const int32_t* sum = nullptr;        // sum of each block's q
  const int32_t* lane_corr = nullptr;  // per 4 consecutive q: -128 * their sum (Q8Activations)
  // Q4_0 only, per group of 4 whole blocks, for the AVX-512 kernel that multiplies 4 blocks' low
  // nibbles in one instruction and their high nibbles in a second: `q4_halves` holds the group's
  // 128 q as [first 16 of blocks 0..3][last 16 of blocks 0..3], and `q4_init` 16 int32 per
  // group, lane 4j + k being -8 * (sum of block j's q[4k..4k+3] and q[16+4k..16+4k+3]): the
  // offset of q4_0's levels, started in the lane whose products it corrects.
  // And `q4_scale`, 16 floats per group: lane 4j + k holds block j's activation scale d.
  const int8_t* q4_halves = nullptr;
  const int32_t* q4_init = nullptr;
  const float* q4_scale = nullptr;
  // K-quants: n / 256 super-blocks.
  const BlockQ8_K* k = nullptr;
};

// Bytes of 64-byte aligned scratch needed to prepare n activations for `type`.
size_t quant_activation_bytes(DType type, int64_t n);
QuantActivations prepare_quant_activations(DType type, const float* x, int64_t n, void* buffer);

// ggml's q8_K activation quantisation: per 256 values, the signed largest-magnitude value maps to
// -127 (d = max / -127), q = round-to-nearest-even(x / d) (at most 127), bsums per 16.
void quantize_row_q8_k(const float* x, BlockQ8_K* y, int64_t n);

// x rounded through the activation quantisation of `type`'s dot products (out[i] = d * q), for
// the f32 GEMM of prefill, so prefill and decode see the same activations.
void round_through_quant_activations(DType type, const float* x, int64_t n, float* out);

// How far ahead of its read position a matvec prefetches block-type weights: a row, and at least
// 4 KiB (2, 4 and 8 KiB measured within 4% of each other). Rows are only a page or so long, too
// short for the hardware prefetchers to ramp up on each by themselves.
inline size_t block_prefetch_bytes(DType type, int64_t cols) { return std::max<size_t>(row_bytes(type, cols), 4096); }

// Which code path computes the dot products (tests force each one; Auto = the best available).
bool quant_kernel_available(QuantKernel path);
QuantKernel resolve_quant_kernel(QuantKernel path);  // Auto -> the best available; throws if unavailable

// y[r - r0] = row r of w . x for r in [r0, r1), w.type a block type, on the given (resolved) path.
void quant_dot_rows(const WeightView& w, const QuantActivations& xa, int64_t r0, int64_t r1, float* y,
                    QuantKernel path);

// The per-path implementations (quant_dot_scalar.cpp, quant_dot_simd.cpp) exist per level only
// (tensor/tensor_isa.inc).

}  // namespace kvslim::detail
