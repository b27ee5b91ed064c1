// The public tensor kernels: each forwards to the active instruction-set level's build
// (tensor/isa.h).
#include "tensor/tensor_isa.h"

namespace kvslim {

void matvec(const WeightView& w, const float* x, float* y, ThreadPool& pool) {
  matvec(w, x, y, pool, QuantKernel::Auto);
}

void matvec(const WeightView& w, const float* x, float* y, ThreadPool& pool, QuantKernel path) {
  float* ys[1] = {y};
  matvec_multi({&w, 1}, x, ys, pool, path);
}

void matvec_multi(std::span<const WeightView> ws, const float* x, std::span<float* const> ys, ThreadPool& pool) {
  matvec_multi(ws, x, ys, pool, QuantKernel::Auto);
}

void matvec_multi(std::span<const WeightView> ws, const float* x, std::span<float* const> ys, ThreadPool& pool,
                  QuantKernel path) {
  KVSLIM_ISA_DISPATCH(matvec_multi(ws, x, ys, pool, path));
}

void matmul(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  KVSLIM_ISA_DISPATCH(matmul(w, x, n, y, pool));
}

void matmul_multi(std::span<const WeightView> ws, const float* x, int64_t n, std::span<float* const> ys,
                  ThreadPool& pool) {
  KVSLIM_ISA_DISPATCH(matmul_multi(ws, x, n, ys, pool));
}

void gemm_f32_nt(const float* x, int64_t ldx, int64_t n, const float* w, int64_t w_rows, int64_t k, float* y,
                 int64_t ldy, bool accumulate) {
  KVSLIM_ISA_DISPATCH(gemm_f32_nt(x, ldx, n, w, w_rows, k, y, ldy, accumulate));
}

void gemm_f32_nn(const float* x, int64_t ldx, int64_t n, const float* w, int64_t k, int64_t w_cols, float* y,
                 int64_t ldy, bool accumulate) {
  KVSLIM_ISA_DISPATCH(gemm_f32_nn(x, ldx, n, w, k, w_cols, y, ldy, accumulate));
}

const char* matvec_kernel(DType type) { KVSLIM_ISA_DISPATCH(matvec_kernel(type)); }

const char* matmul_kernel(DType type) { KVSLIM_ISA_DISPATCH(matmul_kernel(type)); }

const char* attention_gemm_kernel() { KVSLIM_ISA_DISPATCH(attention_gemm_kernel()); }

bool bf16_weights_round_x() { KVSLIM_ISA_DISPATCH(bf16_weights_round_x()); }

void rmsnorm(const float* x, const float* weight, float* y, int64_t n, float eps) {
  KVSLIM_ISA_DISPATCH(rmsnorm(x, weight, y, n, eps));
}

void softmax_inplace(float* x, int64_t n, float sink) { KVSLIM_ISA_DISPATCH(softmax_inplace(x, n, sink)); }

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  KVSLIM_ISA_DISPATCH(swiglu(gate, up, out, n));
}

void add_inplace(float* y, const float* x, int64_t n) { KVSLIM_ISA_DISPATCH(add_inplace(y, x, n)); }

void axpy(float a, const float* x, float* y, int64_t n) { KVSLIM_ISA_DISPATCH(axpy(a, x, y, n)); }

float dot(const float* a, const float* b, int64_t n) { KVSLIM_ISA_DISPATCH(dot(a, b, n)); }

void gelu_tanh_gated(const float* gate, const float* up, float* out, int64_t n) {
  KVSLIM_ISA_DISPATCH(gelu_tanh_gated(gate, up, out, n));
}

void rope_yarn_corr_dims(int n_rot, int original_context, float base, float beta_fast, float beta_slow, float dims[2]) {
  KVSLIM_ISA_DISPATCH(rope_yarn_corr_dims(n_rot, original_context, base, beta_fast, beta_slow, dims));
}

void rope_inplace(float* x, int n_heads, int64_t pos, const RopeConfig& config) {
  KVSLIM_ISA_DISPATCH(rope_inplace(x, n_heads, pos, config));
}

int64_t indices_at_least(const float* values, int64_t n, float threshold, int32_t* out) {
  KVSLIM_ISA_DISPATCH(indices_at_least(values, n, threshold, out));
}

void minmax_logit_bounds(const float* lo, const float* hi, int64_t stride, int channels, const float* q, int64_t n,
                         float* out) {
  KVSLIM_ISA_DISPATCH(minmax_logit_bounds(lo, hi, stride, channels, q, n, out));
}

void convert_from_f32(const float* src, DType type, void* dst, int64_t n) {
  KVSLIM_ISA_DISPATCH(convert_from_f32(src, type, dst, n));
}

void convert_to_f32(DType type, const void* src, float* dst, int64_t n) {
  KVSLIM_ISA_DISPATCH(convert_to_f32(type, src, dst, n));
}

namespace detail {

size_t q8_activation_bytes(int64_t n) { KVSLIM_ISA_DISPATCH(detail::q8_activation_bytes(n)); }

size_t quant_activation_bytes(DType type, int64_t n) { KVSLIM_ISA_DISPATCH(detail::quant_activation_bytes(type, n)); }

void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
  KVSLIM_ISA_DISPATCH(detail::quantize_row_q8_0(x, y, n));
}

void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t n) {
  KVSLIM_ISA_DISPATCH(detail::dequantize_row_q8_0(x, y, n));
}

Q8Activations quantize_activations(const float* x, int64_t n, void* buffer) {
  KVSLIM_ISA_DISPATCH(detail::quantize_activations(x, n, buffer));
}

void round_through_q8_activations(const float* x, int64_t n, float* out) {
  KVSLIM_ISA_DISPATCH(detail::round_through_q8_activations(x, n, out));
}

QuantActivations prepare_quant_activations(DType type, const float* x, int64_t n, void* buffer) {
  KVSLIM_ISA_DISPATCH(detail::prepare_quant_activations(type, x, n, buffer));
}

void quantize_row_q8_k(const float* x, BlockQ8_K* y, int64_t n) {
  KVSLIM_ISA_DISPATCH(detail::quantize_row_q8_k(x, y, n));
}

void round_through_quant_activations(DType type, const float* x, int64_t n, float* out) {
  KVSLIM_ISA_DISPATCH(detail::round_through_quant_activations(type, x, n, out));
}

bool quant_kernel_available(QuantKernel path) { KVSLIM_ISA_DISPATCH(detail::quant_kernel_available(path)); }

QuantKernel resolve_quant_kernel(QuantKernel path) { KVSLIM_ISA_DISPATCH(detail::resolve_quant_kernel(path)); }

void quant_dot_rows(const WeightView& w, const QuantActivations& xa, int64_t r0, int64_t r1, float* y,
                    QuantKernel path) {
  KVSLIM_ISA_DISPATCH(detail::quant_dot_rows(w, xa, r0, r1, y, path));
}

bool matmul_q8_available() { KVSLIM_ISA_DISPATCH(detail::matmul_q8_available()); }

bool matmul_q8_takes(DType type) { KVSLIM_ISA_DISPATCH(detail::matmul_q8_takes(type)); }

bool amx_int8_usable() { KVSLIM_ISA_DISPATCH(detail::amx_int8_usable()); }

bool amx_bf16_usable() { KVSLIM_ISA_DISPATCH(detail::amx_bf16_usable()); }
bool bf16_dot_gemm_preferred() { KVSLIM_ISA_DISPATCH(detail::bf16_dot_gemm_preferred()); }
void matmul_bf16_dot(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  KVSLIM_ISA_DISPATCH(detail::matmul_bf16_dot(w, x, n, y, pool));
}

void matmul_bf16_amx(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  KVSLIM_ISA_DISPATCH(detail::matmul_bf16_amx(w, x, n, y, pool));
}

void matmul_q8(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool, Int8Gemm path) {
  KVSLIM_ISA_DISPATCH(detail::matmul_q8(w, x, n, y, pool, path));
}

}  // namespace detail

}  // namespace kvslim
