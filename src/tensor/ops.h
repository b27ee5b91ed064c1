// The numeric kernels of the forward pass. All take and produce f32 activations; weights are
// read in their stored type. Kernels that take a ThreadPool split their work across it.
#pragma once

#include <cstdint>
#include <limits>
#include <span>

#include "tensor/dtype.h"
#include "util/thread_pool.h"

namespace kvslim {

// Code paths of the integer dot products of the block types q4_0 .. q6_k (Auto: the best this
// CPU and build have; the others are forced by tests and benchmarks, and throw if unavailable).
enum class QuantKernel { Auto, Vnni, Avx2, Scalar, Neon };  // Neon: aarch64 (sdot with dotprod)

// y[r] = sum_c W[r][c] * x[c] for every row r. x has W.cols floats, y has W.rows floats.
// Decode's hot path: allocation-free after the first call on a thread.
void matvec(const WeightView& w, const float* x, float* y, ThreadPool& pool);
// The same with the block types' dot products computed on a given path.
void matvec(const WeightView& w, const float* x, float* y, ThreadPool& pool, QuantKernel path);

// ys[i] = ws[i] x for several matrices that read the same x (decode's q/k/v and gate/up): one
// pool dispatch and one preparation of x for all of them, when they share a type and width
// (otherwise one matvec each). Each y is bit-identical to matvec's.
void matvec_multi(std::span<const WeightView> ws, const float* x, std::span<float* const> ys, ThreadPool& pool);
// The same with the quantized kernels' code path forced (tests).
void matvec_multi(std::span<const WeightView> ws, const float* x, std::span<float* const> ys, ThreadPool& pool,
                  QuantKernel path);

// Y[t][r] = sum_c W[r][c] * X[t][c] for t < n. X is n x W.cols, Y is n x W.rows (row-major).
void matmul(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool);
// ys[i] = the matmul of ws[i] and x, for several weights that read the same x (prefill's q/k/v and
// gate/up): where they share a type and width and take the blocked f32 or bf16 GEMM, x is packed
// once and their weight panels go out from one queue (one pool dispatch, one end of work to wait
// for); otherwise one matmul each. Each y is bit-identical to matmul's.
void matmul_multi(std::span<const WeightView> ws, const float* x, int64_t n, std::span<float* const> ys,
                  ThreadPool& pool);

// Single-threaded f32 products for kernels that already run one per thread (prefill attention),
// on the same blocked GEMM as matmul. X is n x k with rows ldx apart; Y is n x (rows of W) with
// rows ldy apart, overwritten or (accumulate) added to.
// nt: W is w_rows x k, row-major: Y[t][j] (+)= sum_c X[t][c] W[j][c].
void gemm_f32_nt(const float* x, int64_t ldx, int64_t n, const float* w, int64_t w_rows, int64_t k, float* y,
                 int64_t ldy, bool accumulate);
// nn: W is k x w_cols, row-major: Y[t][j] (+)= sum_c X[t][c] W[c][j].
void gemm_f32_nn(const float* x, int64_t ldx, int64_t n, const float* w, int64_t k, int64_t w_cols, float* y,
                 int64_t ldy, bool accumulate);

// True when this level multiplies BF16 weights with the CPU's bf16 dot product (AVX512-BF16) in
// decode: matvec (and matmul of one token, which is a matvec) then rounds x to bf16 (nearest
// even) first, as the instruction takes bf16 on both sides (llama.cpp does the same for BF16
// weights). Otherwise, and in matmul of more tokens (the f32 GEMM), x stays f32.
bool bf16_weights_round_x();

// What computes `type`'s products at the active level (kvslim info --system, bench --json):
// decode's matvec and prefill's matmul, e.g. "avx2 f32 gemm 6x16".
const char* matvec_kernel(DType type);
const char* matmul_kernel(DType type);
// What runs prefill attention's products (gemm_f32_nt / _nn).
const char* attention_gemm_kernel();

// y = x / sqrt(mean(x^2) + eps) * weight
void rmsnorm(const float* x, const float* weight, float* y, int64_t n, float eps);

// x = softmax(x), numerically stable (max subtracted). With a finite `sink` (an attention sink,
// gpt-oss: a learned logit that joins the softmax but has no value), the denominator also holds
// exp(sink - max), as ggml's soft_max with sinks: the row then sums to 1 - the sink's share.
void softmax_inplace(float* x, int64_t n, float sink = -std::numeric_limits<float>::infinity());

// out[i] = silu(gate[i]) * up[i]
void swiglu(const float* gate, const float* up, float* out, int64_t n);
// out = gelu(gate) * up with GELU's tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// (Gemma's gated FFN, ggml's gelu).
void gelu_tanh_gated(const float* gate, const float* up, float* out, int64_t n);

void add_inplace(float* y, const float* x, int64_t n);    // y += x
void axpy(float a, const float* x, float* y, int64_t n);  // y += a * x
float dot(const float* a, const float* b, int64_t n);

// Writes the indices i < n with values[i] >= threshold to out, ascending, and returns how many.
// `out` must have room for that count plus 16 (the AVX-512 path stores 16 at a time).
int64_t indices_at_least(const float* values, int64_t n, float threshold, int32_t* out);

// Quest's page bounds: out[p] = sum over c < channels, in channel order from 0, of
// max(q[c] * lo[c * stride + p], q[c] * hi[c * stride + p]), p < n (lo <= hi elementwise). The same
// bits at every level and on both architectures (products and sums rounded apart, never fused).
void minmax_logit_bounds(const float* lo, const float* hi, int64_t stride, int channels, const float* q, int64_t n,
                         float* out);

// Rotary position embedding of `n_heads` consecutive vectors of `head_dim` floats at position
// `pos`. Only the first `n_rot` dims of each head rotate. Pairing: adjacent (x[2i], x[2i+1]) for
// llama/smollm3 (neox = false); split halves (x[i], x[i + n_rot/2]) for qwen2/qwen3/phi3/gemma3 (neox =
// true). theta_i = pos * freq_scale * base^(-2i/n_rot) / freq_factors[i] (freq_factors may be null: all
// 1; freq_scale is linear RoPE scaling, 1 / rope.scaling.factor).
struct RopeConfig {
  int head_dim = 0;
  int n_rot = 0;
  float base = 10000.0f;
  float freq_scale = 1.0f;
  bool neox = false;
  const float* freq_factors = nullptr;  // n_rot/2 entries (Llama 3.1's rope_freqs.weight)
  float attn_factor = 1.0f;             // scales the rotated pairs (Phi-3's rope.scaling.attn_factor)
  // YaRN (ggml's rope_yarn, on when ext_factor != 0): pair i's angle blends the interpolated
  // theta (freq_scale applied) and the extrapolated one (without) by ramp(i) * ext_factor, where
  // ramp is 1 below the correction dims of beta_fast and 0 above those of beta_slow (linear in
  // between) for a model trained on `original_context` positions; the rotated pairs are then
  // scaled by attn_factor * (1 + 0.1 ln(1 / freq_scale)).
  float ext_factor = 0.0f;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  int original_context = 0;
};
// ggml_rope_yarn_corr_dims: the first and last rotary dims [low, high] of YaRN's ramp,
// floor / ceil of n_rot * ln(original_context / (beta * 2 pi)) / (2 ln base), clamped to
// [0, n_rot - 1].
void rope_yarn_corr_dims(int n_rot, int original_context, float base, float beta_fast, float beta_slow, float dims[2]);
void rope_inplace(float* x, int n_heads, int64_t pos, const RopeConfig& config);

}  // namespace kvslim
