// Internal: the x86 intrinsics header, with GCC 12's false -Wmaybe-uninitialized warnings from
// its AVX-512 intrinsics (`__Y = __Y` in the headers) silenced for the including file.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
