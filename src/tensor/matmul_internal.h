// Internal entry points shared by the matmul implementations.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"
#include "util/thread_pool.h"

namespace kvslim::detail {

// Which int8 GEMM runs a block-type prefill. Vnni is the level's vector kernel: AVX-512 VNNI
// (matmul_q8.cpp), at the AVX2 level the maddubs kernel (matmul_q8_avx2.cpp), on aarch64 the
// sdot kernel (dotprod) or the smmla kernel (i8mm) of matmul_q8_neon.cpp. Auto takes
// AMX when amx_int8_usable() and there are at least 16 tokens, else the vector kernel. All give
// bit-identical results (same int32 sums, same f32 scaling order).
enum class Int8Gemm { Auto, Vnni, Amx };

// True when the active level has an int8 GEMM (AVX2, AVX-512 VNNI, or aarch64 dotprod / i8mm).
bool matmul_q8_available();
// True when the active level has an int8 GEMM and it takes `type`: q8_0, q4_0, q4_1, q5_0, q5_1,
// q4_K, q5_K, q6_K, iq4_nl, iq4_xs and mxfp4. q2_K, q3_K and the float types go through the f32 GEMM.
bool matmul_q8_takes(DType type);
// True when the CPU has AMX-INT8 tiles, the kernel lets this process use them
// (arch_prctl ARCH_REQ_XCOMP_PERM), and the environment variable KVSLIM_NO_AMX is unset or "0".
// Decided once per process.
bool amx_int8_usable();
// Y = X W^T for a W of a type that matmul_q8_takes, with X quantised to 8 bits in blocks of 32 (as
// matvec does for q8_0 and the legacy types). Asking for Amx where it is not usable throws.
void matmul_q8(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool,
               Int8Gemm path = Int8Gemm::Auto);

// True at the avx512bf16 level when the CPU has AMX-BF16 tiles and, as for amx_int8_usable, the
// kernel grants them and KVSLIM_NO_AMX is unset or "0". matmul then takes F16 and BF16 prefills
// of 16 tokens or more to matmul_bf16_amx, and gemm_f32_nt / _nn products of 16 rows or more to
// gemm_f32_nt_amx / _nn_amx (tensor_isa.inc): Y = X W^T on bf16 tiles with both sides split into
// exact bf16 terms, as accurate as the f32 GEMM (matmul_bf16_amx.cpp). matmul_bf16_amx refuses
// other weight types; all three throw where AMX-BF16 is not usable.
bool amx_bf16_usable();
void matmul_bf16_amx(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool);
// True at the avx512bf16 level on AMD CPUs (Zen 4 and later), whose vdpbf16ps multiplies at the
// f32 FMA's rate with twice its products; on Intel it runs at half that rate and the f32 GEMM
// is faster. matmul then takes BF16 prefills of 2 tokens or more (those AMX does not take) to
// matmul_bf16_dot: Y = X W^T with vdpbf16ps, x rounded to bf16 (nearest even) as decode rounds
// it for BF16 weights at this level (bf16_weights_round_x). matmul_bf16_dot refuses other weight
// types and empty products, and throws below avx512bf16.
bool bf16_dot_gemm_preferred();
void matmul_bf16_dot(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool);

// unpack_int8_block, quantize_x_block (shared by the AVX2, VNNI, AMX and NEON kernels, so all see
// the same int8 values), matmul_q8_amx, matmul_q8_avx2 and matmul_q8_neon exist per level only
// (tensor/tensor_isa.inc).
// The scales of one 32-value block of a q2_K, q3_K or q6_K row (unpack_int8_halves): value i is
// d * sub[i / 16] * q_i - dmin * min[i / 16] (dmin and min are 0 but for q2_K).
struct Int8Halves {
  float d = 0.0f, dmin = 0.0f;
  int8_t sub[2] = {0, 0}, min[2] = {0, 0};
};

// K slice (in blocks of 32) of the int8 kernels: outputs are summed in f32 per slice and the
// slices added in order, so the kernels round identically.
constexpr int64_t kInt8SliceBlocks = 16;

}  // namespace kvslim::detail
