// Internal entry points shared by the matmul implementations.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"
#include "util/thread_pool.h"

namespace kvslim::detail {

// True when this build has the int8 (AVX-512 VNNI) q8_0 GEMM.
bool matmul_q8_available();
// Y = X W^T for q8_0 W with X quantised to 8 bits in blocks of 32 (as matvec does).
void matmul_q8(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool);

}  // namespace kvslim::detail
