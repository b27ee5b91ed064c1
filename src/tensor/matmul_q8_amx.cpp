// Int8 GEMM on AMX-INT8 tiles (Sapphire Rapids and later), for the same weight types and the
// same activation quantisation as the AVX-512 VNNI kernel in matmul_q8.cpp.
//
// Why per-block tiles: every 32-value block has its own weight scale and activation scale, so
// int32 sums may not run across blocks. One TDPBSSD therefore covers K = 32 (one block):
// A = 16 tokens x 32 int8 (row stride 32), B = 8 quads x 16 weight rows x 4 int8 (the VNNI
// layout), C = 16 x 16 int32. A thread holds a 32-token x 32-row output tile as 2 A, 2 B and
// 4 C tiles (all 8 tile registers), stores the 4 C tiles after each block and scales them
// into f32 accumulators with AVX-512: acc = fma(float(sum), d_w * d_x, acc), plus
// min * (d_x * sum(x_q)) for the types with mins. These are the VNNI kernel's operations in its
// order (its int32 sums are the same exact integers, it sums f32 per slice of
// kInt8SliceBlocks blocks and adds slices in order), so both kernels give identical bits.
//
// Layouts: X is packed once per call in panels of 32 tokens, per block [A0 16x32][A1 16x32]
// [d_x f32 x32][sum(q) f32 x32]. Weights are repacked per (32-row panel, K slice) as
// [B0 8x16x4][B1 8x16x4][d_w x32][min x32] and reused for every token panel. Threads take chunks
// of weight panels from a queue, so each output is computed by one thread in a fixed order.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "tensor/kernels.h"
#include "tensor/matmul_internal.h"
#include "util/error.h"

#include "tensor/simd.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__)
#define KVSLIM_AMX_GEMM 1
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace kvslim::detail {

#if defined(KVSLIM_AMX_GEMM)

namespace {

constexpr int kTM = 16;        // tokens per A tile
constexpr int kMP = 2 * kTM;   // tokens per X panel
constexpr int kNP = 32;        // weight rows per W panel (two B tiles of 16)
constexpr int64_t kKB = kInt8SliceBlocks;
constexpr size_t kTileBytes = 512;  // one A tile (16 x 32) or one B tile (8 x 64)
constexpr size_t kXBlockBytes = 2 * kTileBytes + kMP * 4 + kMP * 4;
constexpr size_t kWBlockBytes = 2 * kTileBytes + kNP * 4 + kNP * 4;

bool detect_amx_int8() {
  const char* off = std::getenv("KVSLIM_NO_AMX");
  if (off != nullptr && off[0] != '\0' && std::strcmp(off, "0") != 0) return false;
  unsigned a, b, c, d;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  const bool tile = (d >> 24) & 1u, int8 = (d >> 25) & 1u;
  if (!tile || !int8) return false;
  // The tile state is off until the process asks the kernel for it (Linux 5.16+).
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

// Tile registers: 0-3 C (C[a][b] = tile 2a + b), 4-5 A, 6-7 B.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

__attribute__((target("amx-tile"))) void load_tile_config() {
  TileConfig cfg;
  for (int t = 0; t < 4; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  for (int t = 4; t < 6; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 32;
  }
  for (int t = 6; t < 8; ++t) {
    cfg.rows[t] = 8;
    cfg.colsb[t] = 64;
  }
  _tile_loadconfig(&cfg);
}

__attribute__((target("amx-tile"))) void release_tiles() { _tile_release(); }

void pack_x_panel(const float* x, int64_t n, int64_t k, int64_t t0, uint8_t* dst) {
  const int64_t nb = k / kQ8Block;
  const int mt = static_cast<int>(std::min<int64_t>(kMP, n - t0));
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* blk = dst + b * kXBlockBytes;
    auto* scales = reinterpret_cast<float*>(blk + 2 * kTileBytes);
    auto* sums = scales + kMP;
    for (int t = 0; t < kMP; ++t) {
      auto* q = reinterpret_cast<int8_t*>(blk + t * kQ8Block);  // A0 then A1: row t at t * 32
      float d = 0.0f;
      int32_t sum = 0;
      if (t < mt) {
        quantize_x_block(x + (t0 + t) * k + b * kQ8Block, q, d, sum);
      } else {
        std::memset(q, 0, kQ8Block);
      }
      scales[t] = d;
      sums[t] = static_cast<float>(sum);
    }
  }
}

// Rows [r0, r0 + kNP) x blocks [b0, b0 + nbk) of w; rows past the end get q = 0, d = 0.
void pack_w_panel(const WeightView& w, int64_t r0, int64_t b0, int64_t nbk, uint8_t* dst) {
  const int nr = static_cast<int>(std::min<int64_t>(kNP, w.rows - r0));
  for (int64_t b = 0; b < nbk; ++b) {
    uint8_t* blk = dst + b * kWBlockBytes;
    auto* scales = reinterpret_cast<float*>(blk + 2 * kTileBytes);
    auto* mins = scales + kNP;
    for (int j = 0; j < kNP; ++j) {
      uint8_t* tile = blk + (j / 16) * kTileBytes + (j % 16) * 4;
      if (j < nr) {
        alignas(32) int8_t q[kQ8Block];
        unpack_int8_block(w.type, w.row(r0 + j), b0 + b, q, scales[j], mins[j]);
        for (int qd = 0; qd < 8; ++qd) std::memcpy(tile + qd * 64, q + 4 * qd, 4);
      } else {
        scales[j] = 0.0f;
        mins[j] = 0.0f;
        for (int qd = 0; qd < 8; ++qd) std::memset(tile + qd * 64, 0, 4);
      }
    }
  }
}

// C[t][j] (+)= the X panel at xp times the W panel at wp over nbk blocks, t < mt, j < nr.
template <bool kMins>
__attribute__((target("amx-tile,amx-int8"))) void tile_kernel(const uint8_t* xp, const uint8_t* wp, int64_t nbk,
                                                                float* c, int64_t ldc, int mt, int nr, bool first) {
  alignas(64) float acc[kMP][kNP];
  alignas(64) int32_t sums[kMP][kNP];
  const bool two = mt > kTM;  // the second A tile holds real tokens
  const int tokens = two ? kMP : kTM;
  for (int t = 0; t < tokens; ++t) {
    _mm512_store_ps(acc[t], _mm512_setzero_ps());
    _mm512_store_ps(acc[t] + 16, _mm512_setzero_ps());
  }
  for (int64_t b = 0; b < nbk; ++b) {
    const uint8_t* xb = xp + b * kXBlockBytes;
    const uint8_t* wb = wp + b * kWBlockBytes;
    _tile_loadd(6, wb, 64);
    _tile_loadd(7, wb + kTileBytes, 64);
    _tile_loadd(4, xb, 32);
    _tile_zero(0);
    _tile_zero(1);
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_stored(0, &sums[0][0], kNP * 4);
    _tile_stored(1, &sums[0][16], kNP * 4);
    if (two) {
      _tile_loadd(5, xb + kTileBytes, 32);
      _tile_zero(2);
      _tile_zero(3);
      _tile_dpbssd(2, 5, 6);
      _tile_dpbssd(3, 5, 7);
      _tile_stored(2, &sums[kTM][0], kNP * 4);
      _tile_stored(3, &sums[kTM][16], kNP * 4);
    }
    const auto* xs = reinterpret_cast<const float*>(xb + 2 * kTileBytes);
    const auto* xsum = xs + kMP;
    const auto* ws = reinterpret_cast<const float*>(wb + 2 * kTileBytes);
    const __m512 w0 = _mm512_load_ps(ws), w1 = _mm512_load_ps(ws + 16);
    __m512 m0 = _mm512_setzero_ps(), m1 = _mm512_setzero_ps();
    if constexpr (kMins) {
      m0 = _mm512_load_ps(ws + kNP);
      m1 = _mm512_load_ps(ws + kNP + 16);
    }
#pragma GCC unroll 4
    for (int t = 0; t < tokens; ++t) {
      const __m512 sx = _mm512_set1_ps(xs[t]);
      __m512 a0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(sums[t])), _mm512_mul_ps(w0, sx),
                                  _mm512_load_ps(acc[t]));
      __m512 a1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(sums[t] + 16)), _mm512_mul_ps(w1, sx),
                                  _mm512_load_ps(acc[t] + 16));
      if constexpr (kMins) {
        const __m512 sxs = _mm512_set1_ps(xs[t] * xsum[t]);
        a0 = _mm512_fmadd_ps(m0, sxs, a0);
        a1 = _mm512_fmadd_ps(m1, sxs, a1);
      }
      _mm512_store_ps(acc[t], a0);
      _mm512_store_ps(acc[t] + 16, a1);
    }
  }
  const __mmask16 mk0 = nr >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << nr) - 1);
  const __mmask16 mk1 = nr >= 32 ? static_cast<__mmask16>(0xffff)
                                 : (nr > 16 ? static_cast<__mmask16>((1u << (nr - 16)) - 1) : static_cast<__mmask16>(0));
  for (int t = 0; t < mt; ++t) {
    float* ct = c + t * ldc;
    __m512 r0 = _mm512_load_ps(acc[t]), r1 = _mm512_load_ps(acc[t] + 16);
    if (!first) {
      r0 = _mm512_add_ps(r0, _mm512_maskz_loadu_ps(mk0, ct));
      r1 = _mm512_add_ps(r1, _mm512_maskz_loadu_ps(mk1, ct + 16));
    }
    _mm512_mask_storeu_ps(ct, mk0, r0);
    _mm512_mask_storeu_ps(ct + 16, mk1, r1);
  }
}

}  // namespace

bool amx_int8_usable() {
  static const bool usable = detect_amx_int8();
  return usable;
}

void matmul_q8_amx(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  const int64_t k = w.cols;
  const int64_t nb = k / kQ8Block;
  const bool has_mins = w.type == DType::Q4_1 || w.type == DType::Q5_1 || w.type == DType::Q4_K || w.type == DType::Q5_K;
  const int64_t n_xpanels = (n + kMP - 1) / kMP;
  const int64_t n_wpanels = (w.rows + kNP - 1) / kNP;
  const size_t xpanel_bytes = static_cast<size_t>(nb) * kXBlockBytes;

  thread_local Scratch x_scratch;
  auto* xp = static_cast<uint8_t*>(x_scratch.get(static_cast<size_t>(n_xpanels) * xpanel_bytes));

  const bool parallel = pool.size() > 1 && static_cast<double>(n) * w.rows * k > 2e6;
  auto pack = [&](int t, int nt) {
    for (int64_t p = n_xpanels * t / nt; p < n_xpanels * (t + 1) / nt; ++p) {
      pack_x_panel(x, n, k, p * kMP, xp + p * xpanel_bytes);
    }
  };
  detail::ChunkQueue queue(n_wpanels, std::clamp<int64_t>(n_wpanels / (4 * pool.size()), 1, 4));
  auto compute = [&](int, int) {
    thread_local Scratch w_scratch;
    auto* wp = static_cast<uint8_t*>(w_scratch.get(static_cast<size_t>(kKB) * kWBlockBytes));
    load_tile_config();
    int64_t p0, p1;
    while (queue.pop(p0, p1)) {
      for (int64_t b0 = 0; b0 < nb; b0 += kKB) {
        const int64_t nbk = std::min(kKB, nb - b0);
        for (int64_t p = p0; p < p1; ++p) {
          const int64_t r0 = p * kNP;
          const int nr = static_cast<int>(std::min<int64_t>(kNP, w.rows - r0));
          pack_w_panel(w, r0, b0, nbk, wp);
          // The panel after this one: the next in this slice, or the first of the next slice.
          int64_t next_r0 = r0 + kNP, next_b0 = b0, next_nbk = nbk;
          if (p + 1 >= p1) {
            next_r0 = p0 * kNP;
            next_b0 = b0 + kKB;
            next_nbk = std::min(kKB, nb - next_b0);
          }
          const detail::PanelPrefetcher prefetcher(w, next_r0,
                                                   next_b0 < nb ? std::min(w.rows, next_r0 + kNP) : next_r0,
                                                   next_b0 * kQ8Block, next_b0 < nb ? next_nbk * kQ8Block : 0,
                                                   n_xpanels);
          for (int64_t xpi = 0; xpi < n_xpanels; ++xpi) {
            const int64_t t0 = xpi * kMP;
            const int mt = static_cast<int>(std::min<int64_t>(kMP, n - t0));
            const uint8_t* xb = xp + xpi * xpanel_bytes + b0 * kXBlockBytes;
            float* c = y + t0 * w.rows + r0;
            if (has_mins) {
              tile_kernel<true>(xb, wp, nbk, c, w.rows, mt, nr, b0 == 0);
            } else {
              tile_kernel<false>(xb, wp, nbk, c, w.rows, mt, nr, b0 == 0);
            }
            prefetcher.part(xpi);
          }
        }
      }
    }
    release_tiles();
  };
  if (parallel) {
    pool.run_fn(pack);
    pool.run_fn(compute);
  } else {
    pack(0, 1);
    compute(0, 1);
  }
}

#else

bool amx_int8_usable() { return false; }

void matmul_q8_amx(const WeightView&, const float*, int64_t, float*, ThreadPool&) {
  fail("matmul_q8: this build has no AMX-INT8 GEMM");
}

#endif

}  // namespace kvslim::detail
