// Every instruction-set level's tensor kernels, declared in its namespace kvslim::isa_<level>
// (tensor/isa.h explains the levels; tensor_isa.inc lists the entry points).
#pragma once

#include <cstdint>
#include <span>

#include "tensor/dtype.h"
#include "tensor/isa_dispatch.h"
#include "tensor/kernels.h"
#include "tensor/matmul_internal.h"
#include "tensor/ops.h"
#include "tensor/quant_dot.h"
#include "util/thread_pool.h"

namespace kvslim {
namespace isa_scalar {
#include "tensor/tensor_isa.inc"
}
#if defined(__x86_64__)
namespace isa_avx2 {
#include "tensor/tensor_isa.inc"
}
namespace isa_avxvnni {
#include "tensor/tensor_isa.inc"
}
namespace isa_avxvnni_check {  // the tests' copy of avxvnni, vpdpbusd emulated (isa_begin.h)
#include "tensor/tensor_isa.inc"
}
namespace isa_avx512f {
#include "tensor/tensor_isa.inc"
}
namespace isa_avx512 {
#include "tensor/tensor_isa.inc"
}
namespace isa_avx512bf16 {
#include "tensor/tensor_isa.inc"
}
#elif defined(__aarch64__)
namespace isa_neon {
#include "tensor/tensor_isa.inc"
}
namespace isa_dotprod {
#include "tensor/tensor_isa.inc"
}
namespace isa_i8mm {
#include "tensor/tensor_isa.inc"
}
#endif
}  // namespace kvslim
