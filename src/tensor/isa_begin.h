// Opens one instruction-set level's build of a kernel file (see tensor/isa.h).
//
// CMake compiles every kernel file once per level with -DKVSLIM_ISA_BUILD_<LEVEL>. This header,
// included after all of the file's other #includes, then
//   - names the level's namespace, KVSLIM_ISA_NS (the file's code goes in kvslim::KVSLIM_ISA_NS),
//   - lets the compiler use the level's instructions from here to the end of the file
//     (#pragma GCC target), and
//   - defines KVSLIM_HAS_<FEATURE> for each extension of the level, which the kernels test
//     instead of the compiler's __AVX2__-style macros (those describe the baseline the rest of
//     the program is built for).
// Why a pragma after the includes rather than -mavx2 on the file: inline functions and templates
// from the standard library and our headers are then compiled for the baseline even here, so the
// copy the linker keeps of, say, std::sort<float*> runs on every CPU. Only what this file
// defines after this point uses the level's instructions, and it lives in the level's namespace.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 intrinsics headers trip false -Wmaybe-uninitialized warnings (`__Y = __Y`).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#if defined(KVSLIM_ISA_BUILD_SCALAR)
#define KVSLIM_ISA_NS isa_scalar

#elif defined(KVSLIM_ISA_BUILD_AVX2)
#define KVSLIM_ISA_NS isa_avx2
#pragma GCC target("avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")
#define KVSLIM_HAS_AVX 1
#define KVSLIM_HAS_AVX2 1
#define KVSLIM_HAS_FMA 1
#define KVSLIM_HAS_F16C 1

#elif defined(KVSLIM_ISA_BUILD_AVXVNNI) || defined(KVSLIM_ISA_BUILD_AVXVNNI_CHECK)
// AVX2 plus AVX-VNNI's vpdpbusd on ymm registers. AVXVNNI_CHECK is the same code for the tests
// only (CMake target kvslim_kernels_AVXVNNI_CHECK): vpdpbusd replaced by an exact AVX2 emulation
// (simd.h's dpbusd256), so that every AVX-VNNI code path can be run and checked on a CPU without
// AVX-VNNI.
#if defined(KVSLIM_ISA_BUILD_AVXVNNI)
#define KVSLIM_ISA_NS isa_avxvnni
#pragma GCC target("avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,avxvnni")
#else
#define KVSLIM_ISA_NS isa_avxvnni_check
#pragma GCC target("avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")
#define KVSLIM_AVXVNNI_EMULATED 1
#endif
#define KVSLIM_HAS_AVX 1
#define KVSLIM_HAS_AVX2 1
#define KVSLIM_HAS_FMA 1
#define KVSLIM_HAS_F16C 1
#define KVSLIM_HAS_AVXVNNI 1

#elif defined(KVSLIM_ISA_BUILD_AVX512F) || defined(KVSLIM_ISA_BUILD_AVX512) || defined(KVSLIM_ISA_BUILD_AVX512BF16)
// avx512f is Skylake-SP/X's AVX-512 (F/BW/VL/DQ, no VNNI): 512-bit float kernels, and the int8
// kernels of the avx2 level (vpmaddubsw, 512-bit where they have that form), since vpdpbusd is
// missing. avx512 adds VNNI, avx512bf16 BF16 and VBMI.
#if defined(KVSLIM_ISA_BUILD_AVX512F)
#define KVSLIM_ISA_NS isa_avx512f
#pragma GCC target("avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,avx512f,avx512bw,avx512vl,avx512dq,avx512cd")
#elif defined(KVSLIM_ISA_BUILD_AVX512)
#define KVSLIM_ISA_NS isa_avx512
#pragma GCC target("avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,avx512f,avx512bw,avx512vl,avx512dq,avx512cd,avx512vnni")
#define KVSLIM_HAS_AVX512VNNI 1
#else
#define KVSLIM_ISA_NS isa_avx512bf16
#pragma GCC target( \
    "avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,avx512f,avx512bw,avx512vl,avx512dq,avx512cd,avx512vnni,avx512bf16,avx512vbmi")
#define KVSLIM_HAS_AVX512VNNI 1
#define KVSLIM_HAS_AVX512BF16 1
#define KVSLIM_HAS_AVX512VBMI 1
#endif
#define KVSLIM_HAS_AVX 1
#define KVSLIM_HAS_AVX2 1
#define KVSLIM_HAS_FMA 1
#define KVSLIM_HAS_F16C 1
#define KVSLIM_HAS_AVX512F 1
#define KVSLIM_HAS_AVX512BW 1
#define KVSLIM_HAS_AVX512VL 1
#define KVSLIM_HAS_AVX512DQ 1

#elif defined(KVSLIM_ISA_BUILD_NEON)
#define KVSLIM_ISA_NS isa_neon
#define KVSLIM_HAS_NEON 1

#elif defined(KVSLIM_ISA_BUILD_NEONDOT)
#define KVSLIM_ISA_NS isa_dotprod
#pragma GCC target("arch=armv8.2-a+dotprod")
#define KVSLIM_HAS_NEON 1
#define KVSLIM_HAS_NEON_DOTPROD 1

#elif defined(KVSLIM_ISA_BUILD_NEONI8MM)
#define KVSLIM_ISA_NS isa_i8mm
#pragma GCC target("arch=armv8.6-a+dotprod+i8mm")
#define KVSLIM_HAS_NEON 1
#define KVSLIM_HAS_NEON_DOTPROD 1
#define KVSLIM_HAS_NEON_I8MM 1

#else
#error "a kernel file is compiled once per level with -DKVSLIM_ISA_BUILD_<LEVEL> (see CMakeLists.txt)"
#endif
