// CPU feature detection and the choice of the active instruction-set level.
#include "tensor/isa.h"

#include <cstdlib>
#include <fstream>
#include <mutex>

#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include "util/error.h"

namespace kvslim {

namespace detail {
std::atomic<int> g_active_isa{-1};
}  // namespace detail

namespace {

constexpr Isa kAllIsas[] = {Isa::Scalar,     Isa::Avx2, Isa::AvxVnni, Isa::Avx512F, Isa::Avx512,
                            Isa::Avx512Bf16, Isa::Neon, Isa::NeonDot, Isa::NeonI8mm};

#if defined(__x86_64__)
constexpr Isa kCompiled[] = {Isa::Scalar, Isa::Avx2, Isa::AvxVnni, Isa::Avx512F, Isa::Avx512, Isa::Avx512Bf16};
#elif defined(__aarch64__)
constexpr Isa kCompiled[] = {Isa::Scalar, Isa::Neon, Isa::NeonDot, Isa::NeonI8mm};
#else
constexpr Isa kCompiled[] = {Isa::Scalar};
#endif

// The CPU's extensions that decide a level, read once.
struct Features {
  bool avx2 = false, fma = false, f16c = false, avxvnni = false;
  bool avx512 = false, avx512vnni = false, avx512bf16 = false, avx512vbmi = false;
  bool neon = false, fp16 = false, dotprod = false, i8mm = false;
};

Features detect() {
  Features f;
#if defined(__x86_64__)
  // libgcc's checks include the OS's support for the register state (XCR0), so a CPU whose
  // kernel does not save the AVX-512 registers reports no AVX-512.
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.f16c = __builtin_cpu_supports("f16c");
  f.avxvnni = __builtin_cpu_supports("avxvnni");
  f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  f.avx512vnni = __builtin_cpu_supports("avx512vnni");
  f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
  f.avx512vbmi = __builtin_cpu_supports("avx512vbmi");
#elif defined(__aarch64__)
  f.neon = true;  // Advanced SIMD is part of every aarch64 CPU
#if defined(__linux__)
  const unsigned long hw = getauxval(AT_HWCAP);
  const unsigned long hw2 = getauxval(AT_HWCAP2);
  f.fp16 = (hw & HWCAP_FPHP) != 0;
  f.dotprod = (hw & HWCAP_ASIMDDP) != 0;
#if defined(HWCAP2_I8MM)
  f.i8mm = (hw2 & HWCAP2_I8MM) != 0;
#else
  (void)hw2;
#endif
#endif
#endif
  return f;
}

const Features& features() {
  static const Features f = detect();
  return f;
}

bool is_compiled(Isa isa) {
  for (Isa c : kCompiled) {
    if (c == isa) return true;
  }
  return false;
}

Isa choose_initial() {
  const char* forced = std::getenv("KVSLIM_ISA");
  if (forced == nullptr || *forced == '\0') return best_isa();
  const Isa isa = isa_from_name(forced);
  if (!is_compiled(isa))
    fail("KVSLIM_ISA={}: this build has no {} kernels (it has: {})", forced, forced, [] {
      std::string s;
      for (Isa c : kCompiled) s += (s.empty() ? "" : ", ") + std::string(isa_name(c));
      return s;
    }());
  if (!cpu_supports(isa)) {
    std::string have;
    for (Isa s : supported_isas()) have += (have.empty() ? "" : ", ") + std::string(isa_name(s));
    fail("KVSLIM_ISA={}: this CPU cannot run the {} kernels (it runs: {})", forced, forced, have);
  }
  return isa;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::AvxVnni: return "avxvnni";
    case Isa::Avx512F: return "avx512f";
    case Isa::Avx512: return "avx512";
    case Isa::Avx512Bf16: return "avx512bf16";
    case Isa::Neon: return "neon";
    case Isa::NeonDot: return "dotprod";
    case Isa::NeonI8mm: return "i8mm";
  }
  return "?";
}

Isa isa_from_name(std::string_view name) {
  std::string names;
  for (Isa isa : kAllIsas) {
    if (name == isa_name(isa)) return isa;
    names += (names.empty() ? "" : ", ") + std::string(isa_name(isa));
  }
  fail("unknown instruction-set level '{}' (known: {})", name, names);
}

std::span<const Isa> compiled_isas() { return kCompiled; }

bool cpu_supports(Isa isa) {
  const Features& f = features();
  switch (isa) {
    case Isa::Scalar: return true;
    case Isa::Avx2: return f.avx2 && f.fma && f.f16c;
    case Isa::AvxVnni: return cpu_supports(Isa::Avx2) && f.avxvnni;
    case Isa::Avx512F: return cpu_supports(Isa::Avx2) && f.avx512;
    case Isa::Avx512: return cpu_supports(Isa::Avx512F) && f.avx512vnni;
    case Isa::Avx512Bf16: return cpu_supports(Isa::Avx512) && f.avx512bf16 && f.avx512vbmi;
    case Isa::Neon: return f.neon && f.fp16;
    case Isa::NeonDot: return cpu_supports(Isa::Neon) && f.dotprod;
    case Isa::NeonI8mm: return cpu_supports(Isa::NeonDot) && f.i8mm;
  }
  return false;
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa isa : kCompiled) {
    if (cpu_supports(isa)) out.push_back(isa);
  }
  return out;
}

Isa best_isa() { return supported_isas().back(); }

Isa active_isa() {
  const int current = detail::g_active_isa.load(std::memory_order_relaxed);
  if (current >= 0) return static_cast<Isa>(current);
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  if (detail::g_active_isa.load() < 0) detail::g_active_isa.store(static_cast<int>(choose_initial()));
  return static_cast<Isa>(detail::g_active_isa.load());
}

void set_active_isa(Isa isa) {
  if (!is_compiled(isa)) fail("this build has no {} kernels", isa_name(isa));
  if (!cpu_supports(isa)) fail("this CPU cannot run the {} kernels", isa_name(isa));
  detail::g_active_isa.store(static_cast<int>(isa));
}

std::string cpu_description() {
  std::string model;
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0 || line.rfind("Model", 0) == 0 || line.rfind("CPU part", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) model = line.substr(colon + 2);
      break;
    }
  }
  if (model.empty()) model = "unknown CPU";
  const Features& f = features();
  std::string flags;
  auto add = [&](bool has, const char* name) {
    if (!has) return;
    if (!flags.empty()) flags += ' ';
    flags += name;
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.f16c, "f16c");
  add(f.avxvnni, "avxvnni");
  add(f.avx512, "avx512f/bw/vl/dq");
  add(f.avx512vnni, "avx512vnni");
  add(f.avx512bf16, "avx512bf16");
  add(f.avx512vbmi, "avx512vbmi");
  add(f.neon, "neon");
  add(f.fp16, "fp16");
  add(f.dotprod, "dotprod");
  add(f.i8mm, "i8mm");
  return model + " (" + (flags.empty() ? "baseline only" : flags) + ")";
}

}  // namespace kvslim
