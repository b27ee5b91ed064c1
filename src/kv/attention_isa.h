// Every instruction-set level's attention kernels, declared in its namespace kvslim::isa_<level>
// (tensor/isa.h explains the levels).
#pragma once

#include "kv/attention.h"

namespace kvslim {
namespace isa_scalar {
#include "kv/attention_isa.inc"
}
#if defined(__x86_64__)
namespace isa_avx2 {
#include "kv/attention_isa.inc"
}
namespace isa_avxvnni {
#include "kv/attention_isa.inc"
}
namespace isa_avxvnni_check {  // the tests' copy of avxvnni, vpdpbusd emulated (isa_begin.h)
#include "kv/attention_isa.inc"
}
namespace isa_avx512f {
#include "kv/attention_isa.inc"
}
namespace isa_avx512 {
#include "kv/attention_isa.inc"
}
namespace isa_avx512bf16 {
#include "kv/attention_isa.inc"
}
#elif defined(__aarch64__)
namespace isa_neon {
#include "kv/attention_isa.inc"
}
namespace isa_dotprod {
#include "kv/attention_isa.inc"
}
namespace isa_i8mm {
#include "kv/attention_isa.inc"
}
#endif
}  // namespace kvslim
