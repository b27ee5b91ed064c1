// Int8 GEMM on AMX-INT8 tiles (Sapphire Rapids and later), for the same weight types and the
// same activation quantisation as the AVX-512 VNNI kernel in matmul_q8.cpp.
//
// Why one block per tile product: every 32-value block has its own weight and activation
// scale, so int32 sums may not run across blocks. Each TDPBSSD therefore covers K = 32:
// A = 16 weight rows x 32 int8, B = 8 quads x 16 tokens x 4 int8 (the VNNI layout),
// C = 16 rows x 16 tokens of int32. Weights are the A side because a q8_0 row block's 32 int8
// values sit contiguously in the file's own layout: A tiles load straight from the weight
// matrix with the row stride, so q8_0 weights are never repacked (the other types are unpacked
// once per 16-row panel into the same row layout). Activations, packed once per call, are B.
//
// After each block the C tile is stored and scaled into f32 accumulators held in registers
// (acc[row] over 16 tokens) with AVX-512: acc = fma(float(sum), d_w * d_x, acc), plus
// min * (d_x * sum(x_q)) for the types with mins. The next block's tile product runs meanwhile
// (two sets of tile registers). These are the VNNI kernel's float operations in its order:
// its int32 sums are the same exact integers, it sums in f32 per slice of kInt8SliceBlocks
// blocks and adds the slices in order, as done here; the 16x16 result is transposed once at the
// end. So both kernels give identical bits. Threads take chunks of 16-row weight panels from a
// queue, so each output is computed by one thread in a fixed order.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "tensor/kernels.h"
#include "tensor/matmul_internal.h"
#include "util/error.h"

#include "tensor/simd.h"
#include "tensor/transpose16.h"

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

constexpr int kT = 16;                            // tokens per X panel (B tile columns)
constexpr int kR = 16;                            // weight rows per panel (A tile rows)
constexpr size_t kXBlockBytes = 512 + kT * 4 * 2;  // B tile [8][16][4], d_x [16], sum(q) [16]

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

// Tile registers: 0-1 C, 2-3 A, 4-5 B (two sets, for even and odd blocks).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

__attribute__((target("amx-tile"))) void load_tile_config() {
  TileConfig cfg;
  for (int t = 0; t < 2; ++t) {
    cfg.rows[t] = 16;  // C: 16 rows x 16 int32
    cfg.colsb[t] = 64;
    cfg.rows[2 + t] = 16;  // A: 16 rows x 32 int8
    cfg.colsb[2 + t] = 32;
    cfg.rows[4 + t] = 8;  // B: 8 quads x 16 tokens x 4 int8
    cfg.colsb[4 + t] = 64;
  }
  _tile_loadconfig(&cfg);
}

__attribute__((target("amx-tile"))) void release_tiles() { _tile_release(); }

void pack_x_panel(const float* x, int64_t n, int64_t k, int64_t t0, uint8_t* dst) {
  const int64_t nb = k / kQ8Block;
  const int mt = static_cast<int>(std::min<int64_t>(kT, n - t0));
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* blk = dst + b * kXBlockBytes;
    auto* scales = reinterpret_cast<float*>(blk + 512);
    auto* sums = scales + kT;
    for (int t = 0; t < kT; ++t) {
      alignas(32) int8_t q[kQ8Block];
      float d = 0.0f;
      int32_t sum = 0;
      if (t < mt) {
        quantize_x_block(x + (t0 + t) * k + b * kQ8Block, q, d, sum);
      } else {
        std::memset(q, 0, sizeof(q));
      }
      scales[t] = d;
      sums[t] = static_cast<float>(sum);
      for (int qd = 0; qd < 8; ++qd) std::memcpy(blk + (qd * kT + t) * 4, q + 4 * qd, 4);
    }
  }
}

constexpr int kGroup = 4;                                  // weight panels per group (64 rows)
constexpr size_t kABlockBytes = static_cast<size_t>(kR) * kQ8Block;  // one A tile: 16 rows x 32
// A group's K slice: per panel [block][16 rows][32 int8] (A tiles with row stride 32), then the
// scales and mins, f32 [panel][block][16].
constexpr size_t kAPanelBytes = static_cast<size_t>(kInt8SliceBlocks) * kABlockBytes;
constexpr size_t kAGroupBytes = kGroup * (kAPanelBytes + 2 * kInt8SliceBlocks * kR * 4);

// Unpacks rows [r0, r0 + 16 * np) x blocks [b0, b0 + nbk) into the group layout; rows past the
// end get q = 0, scale = min = 0.
void pack_w_group(const WeightView& w, int64_t r0, int np, int64_t b0, int64_t nbk, uint8_t* dst) {
  auto* scales = reinterpret_cast<float*>(dst + kGroup * kAPanelBytes);
  float* mins = scales + kGroup * kInt8SliceBlocks * kR;
  const size_t q8_block = dtype_block_bytes(DType::Q8_0);
  for (int p = 0; p < np; ++p) {
    uint8_t* panel = dst + p * kAPanelBytes;
    for (int j = 0; j < kR; ++j) {
      const int64_t r = r0 + p * kR + j;
      float* sc = scales + (p * kInt8SliceBlocks) * kR + j;
      float* mn = mins + (p * kInt8SliceBlocks) * kR + j;
      if (r >= w.rows) {
        for (int64_t b = 0; b < nbk; ++b) {
          sc[b * kR] = mn[b * kR] = 0.0f;
          std::memset(panel + b * kABlockBytes + j * kQ8Block, 0, kQ8Block);
        }
        continue;
      }
      const uint8_t* row = w.row(r);
      if (w.type == DType::Q8_0) {
        for (int64_t b = 0; b < nbk; ++b) {
          const uint8_t* blk = row + (b0 + b) * q8_block;
          uint16_t h;
          std::memcpy(&h, blk, 2);
          sc[b * kR] = fp16_to_fp32(h);
          mn[b * kR] = 0.0f;
          _mm256_store_si256(reinterpret_cast<__m256i*>(panel + b * kABlockBytes + j * kQ8Block),
                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2)));
        }
      } else {
        for (int64_t b = 0; b < nbk; ++b) {
          unpack_int8_block(w.type, row, b0 + b, reinterpret_cast<int8_t*>(panel + b * kABlockBytes + j * kQ8Block),
                            sc[b * kR], mn[b * kR]);
        }
      }
    }
  }
}

// acc[r] += C[r] * (d_w[r] * d_x) (+ min[r] * d_x * sum(x_q)) for the C tile stored at c.
template <bool kMins>
__attribute__((always_inline)) inline void scale_block(__m512 (&acc)[kR], const int32_t* c, const float* ws,
                                                       const float* wm, const uint8_t* xb) {
  const __m512 dx = _mm512_load_ps(reinterpret_cast<const float*>(xb + 512));
  __m512 dxs = _mm512_setzero_ps();
  if constexpr (kMins) dxs = _mm512_mul_ps(dx, _mm512_load_ps(reinterpret_cast<const float*>(xb + 512) + kT));
#pragma GCC unroll 16
  for (int r = 0; r < kR; ++r) {
    const __m512 s = _mm512_mul_ps(_mm512_set1_ps(ws[r]), dx);
    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c + 16 * r)), s, acc[r]);
    if constexpr (kMins) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(wm[r]), dxs, acc[r]);
  }
}

#define KVSLIM_TILE_BLOCK(C, A, B, b, buf)            \
  do {                                                 \
    _tile_loadd(A, aq + (b) * kABlockBytes, kQ8Block); \
    _tile_loadd(B, xp + (b) * kXBlockBytes, 64);       \
    _tile_zero(C);                                     \
    _tile_dpbssd(C, A, B);                             \
    _tile_stored(C, buf, 64);                          \
  } while (0)

// One K slice (nbk blocks) of a 16-row panel times a 16-token panel, transposed into y
// (t < mt, r < nr): stored on the first slice, added on later ones, as the VNNI kernel does.
template <bool kMins>
__attribute__((target("amx-tile,amx-int8"))) void slice_kernel(const uint8_t* aq, const float* ws, const float* wm,
                                                                 const uint8_t* xp, int64_t nbk, float* y,
                                                                 int64_t ldy, int mt, int nr, bool first) {
  alignas(64) int32_t cbuf[2][kR * 16];
  __m512 acc[kR];
#pragma GCC unroll 16
  for (int r = 0; r < kR; ++r) acc[r] = _mm512_setzero_ps();
  int64_t b = 0;
  // Two blocks per step on two sets of tile registers, so one block's tile product runs
  // while the other's sums are scaled.
  for (; b + 1 < nbk; b += 2) {
    KVSLIM_TILE_BLOCK(0, 2, 4, b, cbuf[0]);
    KVSLIM_TILE_BLOCK(1, 3, 5, b + 1, cbuf[1]);
    scale_block<kMins>(acc, cbuf[0], ws + b * kR, wm + b * kR, xp + b * kXBlockBytes);
    scale_block<kMins>(acc, cbuf[1], ws + (b + 1) * kR, wm + (b + 1) * kR, xp + (b + 1) * kXBlockBytes);
  }
  if (b < nbk) {
    KVSLIM_TILE_BLOCK(0, 2, 4, b, cbuf[0]);
    scale_block<kMins>(acc, cbuf[0], ws + b * kR, wm + b * kR, xp + b * kXBlockBytes);
  }
  transpose16x16_ps(acc);  // acc[t] = token t's outputs over the 16 rows
  const __mmask16 m = nr >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << nr) - 1);
  for (int t = 0; t < mt; ++t) {
    float* yt = y + t * ldy;
    _mm512_mask_storeu_ps(yt, m, first ? acc[t] : _mm512_add_ps(_mm512_maskz_loadu_ps(m, yt), acc[t]));
  }
}

#undef KVSLIM_TILE_BLOCK

}  // namespace

bool amx_int8_usable() {
  static const bool usable = detect_amx_int8();
  return usable;
}

void matmul_q8_amx(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  const int64_t k = w.cols;
  const int64_t nb = k / kQ8Block;
  const bool has_mins = w.type == DType::Q4_1 || w.type == DType::Q5_1 || w.type == DType::Q4_K || w.type == DType::Q5_K;
  const int64_t n_xpanels = (n + kT - 1) / kT;
  const int64_t n_groups = (w.rows + kGroup * kR - 1) / (kGroup * kR);
  const size_t xpanel_bytes = static_cast<size_t>(nb) * kXBlockBytes;

  thread_local Scratch x_scratch;
  auto* xp = static_cast<uint8_t*>(x_scratch.get(static_cast<size_t>(n_xpanels) * xpanel_bytes));

  const bool parallel = pool.size() > 1 && static_cast<double>(n) * w.rows * k > 2e6;
  auto pack = [&](int t, int nt) {
    for (int64_t p = n_xpanels * t / nt; p < n_xpanels * (t + 1) / nt; ++p) {
      pack_x_panel(x, n, k, p * kT, xp + p * xpanel_bytes);
    }
  };
  detail::ChunkQueue queue(n_groups, 1);
  auto compute = [&](int, int) {
    thread_local Scratch a_scratch;
    auto* ap = static_cast<uint8_t*>(a_scratch.get(kAGroupBytes));
    const auto* scales = reinterpret_cast<const float*>(ap + kGroup * kAPanelBytes);
    const float* mins = scales + kGroup * kInt8SliceBlocks * kR;
    load_tile_config();
    int64_t g0, g1;
    while (queue.pop(g0, g1)) {
      const int64_t r0 = g0 * kGroup * kR;
      const int np = static_cast<int>(std::min<int64_t>(kGroup, (w.rows - r0 + kR - 1) / kR));
      for (int64_t b0 = 0; b0 < nb; b0 += kInt8SliceBlocks) {
        const int64_t nbk = std::min(kInt8SliceBlocks, nb - b0);
        pack_w_group(w, r0, np, b0, nbk, ap);
        // Pull the next slice (or the next group's first) towards the cache meanwhile.
        const int64_t next_b0 = b0 + kInt8SliceBlocks < nb ? b0 + kInt8SliceBlocks : 0;
        const int64_t next_r0 = next_b0 != 0 ? r0 : r0 + kGroup * kR;
        const int64_t next_r1 = std::min(w.rows, next_r0 + kGroup * kR);
        const detail::PanelPrefetcher prefetcher(w, next_r0, std::max(next_r0, next_r1), next_b0 * kQ8Block,
                                                 std::min(kInt8SliceBlocks, nb - next_b0) * kQ8Block, n_xpanels);
        for (int64_t xpi = 0; xpi < n_xpanels; ++xpi) {
          const int64_t t0 = xpi * kT;
          const int mt = static_cast<int>(std::min<int64_t>(kT, n - t0));
          const uint8_t* xb = xp + xpi * xpanel_bytes + b0 * kXBlockBytes;
          for (int p = 0; p < np; ++p) {
            const int64_t pr0 = r0 + p * kR;
            const int nr = static_cast<int>(std::min<int64_t>(kR, w.rows - pr0));
            const uint8_t* aq = ap + p * kAPanelBytes;
            const float* ws = scales + p * kInt8SliceBlocks * kR;
            const float* wm = mins + p * kInt8SliceBlocks * kR;
            float* yp = y + t0 * w.rows + pr0;
            if (has_mins) {
              slice_kernel<true>(aq, ws, wm, xb, nbk, yp, w.rows, mt, nr, b0 == 0);
            } else {
              slice_kernel<false>(aq, ws, wm, xb, nbk, yp, w.rows, mt, nr, b0 == 0);
            }
          }
          prefetcher.part(xpi);
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
