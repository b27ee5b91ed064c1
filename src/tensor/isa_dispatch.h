// KVSLIM_ISA_DISPATCH(call): runs `call` (a kernel entry point with its arguments) in the active
// instruction-set level's namespace and returns its result. The public kernels are one line of
// this each (tensor/kernel_dispatch.cpp, kv/attention_dispatch.cpp); the levels' namespaces are
// declared by the layer's *_isa.h header.
#pragma once

#include "tensor/isa.h"

namespace kvslim::detail {

inline Isa dispatch_isa() {
  const int current = g_active_isa.load(std::memory_order_relaxed);
  return current >= 0 ? static_cast<Isa>(current) : active_isa();
}

}  // namespace kvslim::detail

#if defined(__x86_64__)
#define KVSLIM_ISA_DISPATCH(call)                                \
  switch (::kvslim::detail::dispatch_isa()) {                    \
    case ::kvslim::Isa::Avx512Bf16: return isa_avx512bf16::call; \
    case ::kvslim::Isa::Avx512: return isa_avx512::call;         \
    case ::kvslim::Isa::Avx512F: return isa_avx512f::call;       \
    case ::kvslim::Isa::AvxVnni: return isa_avxvnni::call;       \
    case ::kvslim::Isa::Avx2: return isa_avx2::call;             \
    default: return isa_scalar::call;                            \
  }
#elif defined(__aarch64__)
#define KVSLIM_ISA_DISPATCH(call)                          \
  switch (::kvslim::detail::dispatch_isa()) {              \
    case ::kvslim::Isa::NeonI8mm: return isa_i8mm::call;   \
    case ::kvslim::Isa::NeonDot: return isa_dotprod::call; \
    case ::kvslim::Isa::Neon: return isa_neon::call;       \
    default: return isa_scalar::call;                      \
  }
#else
#define KVSLIM_ISA_DISPATCH(call) return isa_scalar::call;
#endif
