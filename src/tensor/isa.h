// Instruction-set levels: which kernels this process runs.
//
// The default build is portable: everything outside the kernels is compiled for the
// architecture's baseline (x86-64 with SSE2, or aarch64 with NEON), and the kernel files are
// compiled once per level below (isa_begin.h), each copy in its own namespace
// kvslim::isa_<level>. At start the process picks the best level the CPU has, or the one named
// by the environment variable KVSLIM_ISA (a lower level, for comparisons and tests; a level the
// CPU lacks is refused). Every public kernel (ops.h, attention.h, ...) forwards to the copy of
// the active level.
#pragma once

#include <atomic>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvslim {

// Lowest first. A level includes every level before it of the same architecture, except that
// the AVX-512 levels do not need AvxVnni (Skylake-X, Ice Lake and Zen 4 have AVX-512 but not the
// VEX-encoded AVX-VNNI).
enum class Isa {
  Scalar,      // the architecture's baseline: portable C++ (auto-vectorised with SSE2 / NEON)
  Avx2,        // x86: AVX2 + FMA + F16C (Haswell, Zen 1 and later)
  AvxVnni,     // x86: Avx2 + AVX-VNNI, vpdpbusd on 256-bit registers (Alder Lake and later client
               // CPUs, Sierra Forest, Zen 5)
  Avx512F,     // x86: Avx2 + AVX-512 F/BW/VL/DQ without VNNI (Skylake-SP/X): 512-bit float
               // kernels, the int8 kernels of Avx2
  Avx512,      // x86: Avx512F + VNNI (Cascade Lake, Ice Lake, Zen 4 and later)
  Avx512Bf16,  // x86: Avx512 + BF16 + VBMI (Sapphire Rapids, Zen 4 and later); AMX-INT8 when usable
  Neon,        // aarch64: NEON with fp16 conversions (every aarch64 CPU)
  NeonDot,     // aarch64: + the int8 dot product (ARMv8.2 dotprod: Apple M1, Graviton 2, Pi 5)
  NeonI8mm,    // aarch64: + the int8 matrix multiply (ARMv8.6 i8mm: Apple M2, Graviton 3)
};

const char* isa_name(Isa isa);
// The level named `name` (as isa_name spells it); throws Error naming the choices otherwise.
Isa isa_from_name(std::string_view name);

// The levels this build has kernels for, lowest first (Scalar, then the architecture's).
std::span<const Isa> compiled_isas();
// True when the CPU (and the OS, for the register state) can run `isa`'s kernels.
bool cpu_supports(Isa isa);
// The compiled levels this CPU runs, lowest first.
std::vector<Isa> supported_isas();
// The highest of supported_isas().
Isa best_isa();

// The level the kernels run at. Decided on first use: KVSLIM_ISA if set (an unknown name, or a
// level this CPU lacks, throws Error), else best_isa(). The command line calls it at start so
// that a bad KVSLIM_ISA is reported as one error line before any work.
Isa active_isa();
// Makes `isa` the active level (tests and benchmarks compare levels in one process); throws
// Error if the CPU lacks it. Not thread-safe: call while no kernel runs.
void set_active_isa(Isa isa);

// Restores the previous level when it goes out of scope.
class ScopedIsa {
 public:
  explicit ScopedIsa(Isa isa) : previous_(active_isa()) { set_active_isa(isa); }
  ~ScopedIsa() { set_active_isa(previous_); }
  ScopedIsa(const ScopedIsa&) = delete;
  ScopedIsa& operator=(const ScopedIsa&) = delete;

 private:
  Isa previous_;
};

// The CPU's model name and the instruction-set extensions kvslim looks for that it has, e.g.
// "AMD EPYC 7B13 (avx2 fma f16c)".
std::string cpu_description();

namespace detail {
// The active level as an int, or -1 before active_isa() has decided: what every dispatching
// kernel reads (isa_dispatch.h), one relaxed load per call.
extern std::atomic<int> g_active_isa;
}  // namespace detail

}  // namespace kvslim
