// The driver the int8 GEMMs share (matmul_q8.cpp's AVX-512 VNNI kernel, matmul_q8_avx2.cpp's
// maddubs kernel, matmul_q8_neon.cpp's sdot / smmla kernels; matmul_q8_amx.cpp uses the first
// half): how X and W are packed and multiplied is the kernel's, the order of the work is this
// file's. Include after tensor/isa_begin.h, so that the driver is compiled for the level and
// inlines the kernel's functions.
#pragma once

#include <algorithm>
#include <cstdint>

#include "tensor/kernels.h"
#include "tensor/matmul_internal.h"
#include "tensor/isa_begin.h"
#include "tensor/simd.h"

namespace kvslim::KVSLIM_ISA_NS::detail {

// X's token panels packed by every thread (pack(t, nt) packs the t-th of nt shares), then
// compute(t, nt) on every thread; both on the calling thread when the product of n tokens, `rows`
// and `k` is too small to be worth waking the pool for.
template <class Pack, class Compute>
void pack_then_compute(ThreadPool& pool, int64_t n, int64_t rows, int64_t k, Pack&& pack, Compute&& compute) {
  if (pool.size() > 1 && static_cast<double>(n) * static_cast<double>(rows) * static_cast<double>(k) > 2e6) {
    pool.run_fn(pack);
    pool.run_fn(compute);
  } else {
    pack(0, 1);
    compute(0, 1);
  }
}

// Y = X W^T through a vector int8 kernel of kMR tokens x kNR rows, whose packed blocks are
// kXBlockBytes (per X panel) and kWBlockBytes (per W panel) long:
//   pack_x(x, n, k, t0, dst)           packs tokens [t0, t0 + kMR) of X, every block;
//   pack_w(w, r0, b0, nbk, dst)        packs rows [r0, r0 + kNR) x blocks [b0, b0 + nbk) of W;
//   tile(xp, wp, nbk, c, ldc, mt, nr, first)  multiplies one packed X panel by one packed W
//                                      panel over nbk blocks into c (first: store, else add).
// X is packed once (threads split the token panels); weight panels go out in chunks from a
// queue, and each is repacked per K slice of kInt8SliceBlocks blocks and run against every token
// panel while the next panel's weights are prefetched. The slices are added into y in order, so
// every kernel rounds the same way.
template <int64_t kMR, int64_t kNR, size_t kXBlockBytes, size_t kWBlockBytes, class PackX, class PackW, class Tile>
void int8_gemm(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool, PackX&& pack_x,
               PackW&& pack_w, Tile&& tile) {
  constexpr int64_t kKB = kInt8SliceBlocks;
  const int64_t k = w.cols;
  const int64_t nb = k / kQ8Block;
  const int64_t n_xpanels = (n + kMR - 1) / kMR;
  const int64_t n_wpanels = (w.rows + kNR - 1) / kNR;
  const size_t xpanel_bytes = static_cast<size_t>(nb) * kXBlockBytes;

  thread_local Scratch x_scratch;
  auto* xp = static_cast<uint8_t*>(x_scratch.get(static_cast<size_t>(n_xpanels) * xpanel_bytes));

  auto pack = [&](int t, int nt) {
    for (int64_t p = n_xpanels * t / nt; p < n_xpanels * (t + 1) / nt; ++p) {
      pack_x(x, n, k, p * kMR, xp + p * xpanel_bytes);
    }
  };
  // Weight panels go out in chunks of up to 4 (about 4 chunks per thread at least).
  ChunkQueue queue(n_wpanels, std::clamp<int64_t>(n_wpanels / (4 * pool.size()), 1, 4));
  auto compute = [&](int, int) {
    thread_local Scratch w_scratch;
    auto* wp = static_cast<uint8_t*>(w_scratch.get(static_cast<size_t>(kKB) * kWBlockBytes));
    int64_t p0, p1;
    while (queue.pop(p0, p1)) {
      for (int64_t b0 = 0; b0 < nb; b0 += kKB) {
        const int64_t nbk = std::min(kKB, nb - b0);
        for (int64_t p = p0; p < p1; ++p) {
          const int64_t r0 = p * kNR;
          const int nr = static_cast<int>(std::min<int64_t>(kNR, w.rows - r0));
          pack_w(w, r0, b0, nbk, wp);
          // The panel after this one: the next in this slice, or the first of the next slice.
          int64_t next_r0 = r0 + kNR, next_b0 = b0, next_nbk = nbk;
          if (p + 1 >= p1) {
            next_r0 = p0 * kNR;
            next_b0 = b0 + kKB;
            next_nbk = std::min(kKB, nb - next_b0);
          }
          const PanelPrefetcher prefetcher(w, next_r0, next_b0 < nb ? std::min(w.rows, next_r0 + kNR) : next_r0,
                                           next_b0 * kQ8Block, next_b0 < nb ? next_nbk * kQ8Block : 0, n_xpanels);
          for (int64_t xpi = 0; xpi < n_xpanels; ++xpi) {
            const int64_t t0 = xpi * kMR;
            const int mt = static_cast<int>(std::min<int64_t>(kMR, n - t0));
            tile(xp + xpi * xpanel_bytes + b0 * kXBlockBytes, wp, nbk, y + t0 * w.rows + r0, w.rows, mt, nr, b0 == 0);
            prefetcher.part(xpi);
          }
        }
      }
    }
  };
  pack_then_compute(pool, n, w.rows, k, pack, compute);
}

#if defined(KVSLIM_HAS_AVX512F)
// Writes (the first K slice) or adds (later ones) the f32 tile of the 512-bit kernels, kMR tokens x
// kV vectors of 16 rows, into c: tokens from mt and rows from nr on are left alone.
template <int kMR, int kV>
inline void store_tile_512(const __m512 (&facc)[kMR][kV], float* c, int64_t ldc, int mt, int nr, bool first) {
  __mmask16 masks[kV];
  for (int v = 0; v < kV; ++v) {
    const int left = nr - 16 * v;
    masks[v] = first_lanes16(left);
  }
#pragma GCC unroll 8
  for (int t = 0; t < kMR; ++t) {
    if (t >= mt) break;
    float* ct = c + t * ldc;
#pragma GCC unroll 4
    for (int v = 0; v < kV; ++v) {
      __m512 r = facc[t][v];
      if (!first) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(masks[v], ct + 16 * v));
      _mm512_mask_storeu_ps(ct + 16 * v, masks[v], r);
    }
  }
}
#endif

// The weight types whose 32-value blocks have two 16-value halves with int8 scales (q2_K: and mins)
// of their own (unpack_int8_halves): their kernels sum the halves apart.
inline bool int8_has_halves(DType type) { return type == DType::Q2_K || type == DType::Q3_K || type == DType::Q6_K; }

// The weight types whose int8 levels come with a per-block min (value = scale * q + min).
// (q2_K: a min per 16-value half.)
inline bool int8_has_mins(DType type) {
  return type == DType::Q4_1 || type == DType::Q5_1 || type == DType::Q4_K || type == DType::Q5_K ||
         type == DType::Q2_K;
}

}  // namespace kvslim::KVSLIM_ISA_NS::detail
