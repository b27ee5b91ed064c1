// What the AMX GEMMs share (matmul_q8_amx.cpp: int8 tiles; matmul_bf16_amx.cpp: bf16 tiles):
// whether this process may use the tiles, and each thread's tile configuration. Include after
// tensor/isa_begin.h; the functions live in the level's namespace.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "tensor/isa_begin.h"

#if defined(__x86_64__) && defined(KVSLIM_HAS_AVX512BF16)
namespace kvslim::KVSLIM_ISA_NS::detail {

// CPUID leaf 7 EDX bits of the AMX extensions.
constexpr unsigned kAmxBf16Bit = 22, kAmxTileBit = 24, kAmxInt8Bit = 25;

// True when the CPU has AMX-TILE and the extension at `edx_bit`, the environment variable
// KVSLIM_NO_AMX is unset or "0", and the kernel grants this process the tile state, which is off
// until asked for (arch_prctl ARCH_REQ_XCOMP_PERM, Linux 5.16+; asking twice is harmless).
inline bool amx_granted(unsigned edx_bit) {
  const char* off = std::getenv("KVSLIM_NO_AMX");
  if (off != nullptr && off[0] != '\0' && std::strcmp(off, "0") != 0) return false;
  unsigned a, b, c, d;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  if (((d >> kAmxTileBit) & 1u) == 0 || ((d >> edx_bit) & 1u) == 0) return false;
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

// The 64-byte operand of ldtilecfg: palette 1, then per tile register its row width in bytes
// and its number of rows.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// GCC 12's _tile_loadconfig declares an 8-byte memory operand, so the compiler dropped the
// stores of the rows and column widths as dead and the tiles stayed unconfigured: the first
// tileloadd raised SIGILL on Sapphire Rapids (seen 2026-11-27). This asm reads the whole config.
inline void load_tile_config(const TileConfig& cfg) { asm volatile("ldtilecfg %0" : : "m"(cfg)); }

inline void release_tiles() { asm volatile("tilerelease" ::: "memory"); }

}  // namespace kvslim::KVSLIM_ISA_NS::detail
#endif
