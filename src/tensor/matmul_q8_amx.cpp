// Int8 GEMM on AMX-INT8 tiles (Sapphire Rapids and later), for the same weight types and the
// same activation quantisation as the AVX-512 VNNI kernel in matmul_q8.cpp.
//
// Why one block per tile product: every 32-value block has its own weight and activation
// scale, so int32 sums may not run across blocks. Each TDPBSSD therefore covers K = 32:
// A = 16 weight rows x 32 int8, B = 8 quads x 16 tokens x 4 int8 (the VNNI layout),
// C = 16 rows x 16 tokens of int32. Weights are the A side because a row block's 32 int8 values
// are contiguous (q8_0 stores them so; the other types unpack to it), so packing a weight group
// (128 rows x one K slice of 16 blocks) is a row of 32-byte copies. Activations, packed once per
// call, are the B side.
//
// A kernel call covers 32 rows x 32 tokens with all 8 tile registers (2 A, 2 B, 4 C). After
// each block the 4 C tiles are stored and scaled into f32 accumulators with AVX-512:
// acc = fma(float(sum), d_w * d_x, acc), plus min * (d_x * sum(x_q)) for the types with mins;
// the next block's tile products are issued first, so the tile unit and the vector units
// overlap. These are the VNNI kernel's float operations in its order: its int32 sums are the
// same exact integers, it sums in f32 per slice of kInt8SliceBlocks blocks and adds the slices
// in order into y, as done here into a per-group buffer that is transposed into y once. So both
// kernels give identical bits. Threads take 128-row weight groups from a queue, so each output
// is computed by one thread in a fixed order.
#include <algorithm>
#include <cstring>

#include "tensor/kernels.h"
#include "tensor/matmul_internal.h"
#include "tensor/tensor_isa.h"
#include "util/error.h"

#include "tensor/isa_begin.h"
#include "tensor/simd.h"
#include "tensor/transpose16.h"
#include "tensor/int8_gemm_driver.h"
#include "tensor/amx_tiles.h"

// Only the avx512bf16 level: every AMX CPU has AVX512-BF16, and the avx512 level stands for
// Cascade Lake / Ice Lake, which have none (forcing it on an AMX machine must not use the tiles).
#if defined(__x86_64__) && defined(KVSLIM_HAS_AVX512F) && defined(KVSLIM_HAS_AVX512BW) && \
    defined(KVSLIM_HAS_AVX512VL) && defined(KVSLIM_HAS_AVX512VNNI) && defined(KVSLIM_HAS_AVX512BF16)
#define KVSLIM_AMX_GEMM 1
#endif

namespace kvslim::KVSLIM_ISA_NS::detail {

#if defined(KVSLIM_AMX_GEMM)

namespace {

constexpr int kT = 16;                             // tokens per X panel (B tile columns)
constexpr int kR = 16;                             // weight rows per panel (A tile rows)
constexpr size_t kXBlockBytes = 512 + kT * 4 * 2;  // B tile [8][16][4], d_x [16], sum(q) [16]

// Tile registers 0-3: C, 16 weight rows x 16 int32 (tokens); 4-5: A, 16 weight rows x 32 int8
// (one block); 6-7: B, 8 quads x 16 tokens x 4 int8.
void load_int8_tile_config() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = t >= 6 ? 8 : 16;
    cfg.colsb[t] = t == 4 || t == 5 ? 32 : 64;
  }
  load_tile_config(cfg);
}

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

constexpr int kGroup = 8;  // weight panels per group (128 rows; 8 measured ~5% faster than 4)
constexpr size_t kABlockBytes = static_cast<size_t>(kR) * kQ8Block;  // one A tile: 16 rows x 32
// A group's K slice: per panel [block][16 rows][32 int8] (A tiles with row stride 32), then the
// scales and mins, f32 [panel][row][block] (a row's 16 block scales in one vector).
constexpr size_t kAPanelBytes = static_cast<size_t>(kInt8SliceBlocks) * kABlockBytes;
constexpr size_t kAGroupBytes = kGroup * (kAPanelBytes + 2 * kInt8SliceBlocks * kR * 4);
static_assert(kInt8SliceBlocks == 16, "a row's slice scales are one 16-float vector");

// Unpacks rows [r0, r0 + 16 * np) x blocks [b0, b0 + nbk) into the group layout; rows past the
// end get q = 0, scale = min = 0.
void pack_w_group(const WeightView& w, int64_t r0, int np, int64_t b0, int64_t nbk, uint8_t* dst) {
  auto* scales = reinterpret_cast<float*>(dst + kGroup * kAPanelBytes);
  float* mins = scales + kGroup * kInt8SliceBlocks * kR;
  const int q8_block = static_cast<int>(dtype_block_bytes(DType::Q8_0));
  const __mmask16 bm = first_lanes16(nbk);
  const __m512i scale_offsets = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(q8_block));
  for (int p = 0; p < np; ++p) {
    uint8_t* panel = dst + p * kAPanelBytes;
    for (int j = 0; j < kR; ++j) {
      const int64_t r = r0 + p * kR + j;
      float* sc = scales + (p * kR + j) * kInt8SliceBlocks;
      float* mn = mins + (p * kR + j) * kInt8SliceBlocks;
      if (r >= w.rows) {
        _mm512_store_ps(sc, _mm512_setzero_ps());
        _mm512_store_ps(mn, _mm512_setzero_ps());
        for (int64_t b = 0; b < nbk; ++b) std::memset(panel + b * kABlockBytes + j * kQ8Block, 0, kQ8Block);
        continue;
      }
      const uint8_t* row = w.row(r);
      if (w.type == DType::Q8_0) {
        const uint8_t* blk0 = row + b0 * q8_block;
        // The 16 blocks' f16 scales (the first 2 bytes of each 34-byte block) in one gather.
        const __m512i h = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), bm, scale_offsets, blk0, 1);
        _mm512_store_ps(sc, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h)));
        _mm512_store_ps(mn, _mm512_setzero_ps());
        for (int64_t b = 0; b < nbk; ++b) {
          _mm256_store_si256(reinterpret_cast<__m256i*>(panel + b * kABlockBytes + j * kQ8Block),
                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk0 + b * q8_block + 2)));
        }
      } else {
        for (int64_t b = 0; b < nbk; ++b) {
          unpack_int8_block(w.type, row, b0 + b, reinterpret_cast<int8_t*>(panel + b * kABlockBytes + j * kQ8Block),
                            sc[b], mn[b]);
        }
      }
    }
  }
}

// Tile registers: 0-3 C (C[2 * i + j] = weight rows 16i.., tokens 16j..), 4-5 A, 6-7 B.
#define KVSLIM_TILE_ISSUE(b, cb)                     \
  do {                                               \
    _tile_loadd(4, a0 + (b)*kABlockBytes, kQ8Block); \
    _tile_loadd(6, x0 + (b)*kXBlockBytes, 64);       \
    _tile_zero(0);                                   \
    _tile_dpbssd(0, 4, 6);                           \
    _tile_loadd(7, x1 + (b)*kXBlockBytes, 64);       \
    _tile_zero(1);                                   \
    _tile_dpbssd(1, 4, 7);                           \
    _tile_loadd(5, a1 + (b)*kABlockBytes, kQ8Block); \
    _tile_zero(2);                                   \
    _tile_dpbssd(2, 5, 6);                           \
    _tile_zero(3);                                   \
    _tile_dpbssd(3, 5, 7);                           \
    _tile_stored(0, (cb) + 0 * 256, 64);             \
    _tile_stored(1, (cb) + 1 * 256, 64);             \
    _tile_stored(2, (cb) + 2 * 256, 64);             \
    _tile_stored(3, (cb) + 3 * 256, 64);             \
  } while (0)

// acc[r] += C[r] * (d_w[r] * d_x) (+ min[r] * d_x * sum(x_q)) for one stored 16 x 16 C tile;
// ws / wm: the block's scale / min of row 0, rows kInt8SliceBlocks apart.
template <bool kMins>
__attribute__((always_inline)) inline void scale_tile(float* acc, const int32_t* c, const float* ws, const float* wm,
                                                      const uint8_t* xb) {
  const __m512 dx = _mm512_load_ps(reinterpret_cast<const float*>(xb + 512));
  __m512 dxs = _mm512_setzero_ps();
  if constexpr (kMins) dxs = _mm512_mul_ps(dx, _mm512_load_ps(reinterpret_cast<const float*>(xb + 512) + kT));
#pragma GCC unroll 16
  for (int r = 0; r < kR; ++r) {
    const __m512 s = _mm512_mul_ps(_mm512_set1_ps(ws[r * kInt8SliceBlocks]), dx);
    __m512 v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c + 16 * r)), s, _mm512_load_ps(acc + 16 * r));
    if constexpr (kMins) v = _mm512_fmadd_ps(_mm512_set1_ps(wm[r * kInt8SliceBlocks]), dxs, v);
    _mm512_store_ps(acc + 16 * r, v);
  }
}

// One K slice (nbk blocks) of two 16-row weight panels (a0, a1: A tiles; ws0/ws1, wm0/wm1:
// scales and mins [row][block]) times two 16-token panels (x0, x1), into the four 16 x 16
// [row][token] totals at tot: stored on the first slice, added on later ones, as the VNNI
// kernel does with y. Block b + 1's tile products are issued before block b's sums are
// scaled, so the tile unit and the vector units work at the same time.
template <bool kMins>
__attribute__((target("amx-tile,amx-int8"))) void slice_kernel(const uint8_t* a0, const uint8_t* a1, const float* ws0,
                                                               const float* ws1, const float* wm0, const float* wm1,
                                                               const uint8_t* x0, const uint8_t* x1, int64_t nbk,
                                                               float* tot, bool two_x, bool two_w, bool first) {
  // GCC 12's _tile_loadd declares no memory operand: without this barrier the stores that
  // packed the panels could be moved past the tile loads that read them.
  asm volatile("" : : : "memory");
  alignas(64) int32_t cbuf[2][4 * 256];
  alignas(64) float acc[4][256];
  for (auto& tile : acc) {
    for (int i = 0; i < 256; i += 16) _mm512_store_ps(tile + i, _mm512_setzero_ps());
  }
  KVSLIM_TILE_ISSUE(0, cbuf[0]);
  for (int64_t b = 0; b < nbk; ++b) {
    if (b + 1 < nbk) KVSLIM_TILE_ISSUE(b + 1, cbuf[(b + 1) & 1]);
    const int32_t* cb = cbuf[b & 1];
    const uint8_t* xb0 = x0 + b * kXBlockBytes;
    const uint8_t* xb1 = x1 + b * kXBlockBytes;
    scale_tile<kMins>(acc[0], cb, ws0 + b, wm0 + b, xb0);
    if (two_x) scale_tile<kMins>(acc[1], cb + 256, ws0 + b, wm0 + b, xb1);
    if (two_w) {
      scale_tile<kMins>(acc[2], cb + 512, ws1 + b, wm1 + b, xb0);
      if (two_x) scale_tile<kMins>(acc[3], cb + 768, ws1 + b, wm1 + b, xb1);
    }
  }
  for (int i = 0; i < 4; ++i) {
    float* ti = tot + 256 * i;
#pragma GCC unroll 16
    for (int r = 0; r < 256; r += 16) {
      const __m512 v = _mm512_load_ps(acc[i] + r);
      _mm512_store_ps(ti + r, first ? v : _mm512_add_ps(_mm512_load_ps(ti + r), v));
    }
  }
}

#undef KVSLIM_TILE_ISSUE

// Four [row][token] totals (tile 2i + j: rows 16i.., tokens 16j..) transposed into y[t][r],
// t < mt0 / mt1 and r < nr0 / nr1 of each.
void store_totals(const float* tot, float* y, int64_t ldy, int mt0, int mt1, int nr0, int nr1) {
  for (int i = 0; i < 2; ++i) {
    const int nr = i == 0 ? nr0 : nr1;
    if (nr <= 0) continue;
    const __mmask16 m = first_lanes16(nr);
    for (int j = 0; j < 2; ++j) {
      const int mt = j == 0 ? mt0 : mt1;
      if (mt <= 0) continue;
      __m512 v[16];
      for (int r = 0; r < kR; ++r) v[r] = _mm512_load_ps(tot + 256 * (2 * i + j) + 16 * r);
      transpose16x16_ps(v);  // v[t] = token t's outputs over the 16 rows
      for (int t = 0; t < mt; ++t) _mm512_mask_storeu_ps(y + (16 * j + t) * ldy + 16 * i, m, v[t]);
    }
  }
}

}  // namespace

bool amx_int8_usable() {
  static const bool usable = amx_granted(kAmxInt8Bit);
  return usable;
}

void matmul_q8_amx(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  const int64_t k = w.cols;
  const int64_t nb = k / kQ8Block;
  const bool has_mins = int8_has_mins(w.type);
  const int64_t n_xpanels = (n + kT - 1) / kT;
  const int64_t n_groups = (w.rows + kGroup * kR - 1) / (kGroup * kR);
  const size_t xpanel_bytes = static_cast<size_t>(nb) * kXBlockBytes;

  thread_local Scratch x_scratch;
  auto* xp = static_cast<uint8_t*>(x_scratch.get(static_cast<size_t>(n_xpanels) * xpanel_bytes));

  auto pack = [&](int t, int nt) {
    for (int64_t p = n_xpanels * t / nt; p < n_xpanels * (t + 1) / nt; ++p) {
      pack_x_panel(x, n, k, p * kT, xp + p * xpanel_bytes);
    }
  };
  detail::ChunkQueue queue(n_groups, 1);
  auto compute = [&](int, int) {
    thread_local Scratch a_scratch;
    auto* ap = static_cast<uint8_t*>(a_scratch.get(kAGroupBytes));
    // [token pair][panel pair][4 tiles][16 rows][16 tokens]: a group's outputs over all slices.
    thread_local Scratch t_scratch;
    auto* totals =
        static_cast<float*>(t_scratch.get(static_cast<size_t>((n_xpanels + 1) / 2) * (kGroup / 2) * 1024 * 4));
    const auto* scales = reinterpret_cast<const float*>(ap + kGroup * kAPanelBytes);
    const float* mins = scales + kGroup * kInt8SliceBlocks * kR;
    load_int8_tile_config();
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
                                                 std::min(kInt8SliceBlocks, nb - next_b0) * kQ8Block,
                                                 (n_xpanels + 1) / 2);
        for (int64_t xpi = 0; xpi < n_xpanels; xpi += 2) {
          const int64_t t0 = xpi * kT;
          const int mt1 = static_cast<int>(std::clamp<int64_t>(n - t0 - kT, 0, kT));
          const uint8_t* xb0 = xp + xpi * xpanel_bytes + b0 * kXBlockBytes;
          const uint8_t* xb1 = mt1 > 0 ? xb0 + xpanel_bytes : xb0;  // a real panel either way
          for (int p = 0; p < np; p += 2) {
            const int64_t pr0 = r0 + p * kR;
            const int nr1 = static_cast<int>(std::clamp<int64_t>(w.rows - pr0 - kR, 0, kR));
            const int p1 = nr1 > 0 ? p + 1 : p;
            const uint8_t* a0 = ap + p * kAPanelBytes;
            const uint8_t* a1 = ap + p1 * kAPanelBytes;
            const float* ws0 = scales + p * kInt8SliceBlocks * kR;
            const float* ws1 = scales + p1 * kInt8SliceBlocks * kR;
            const float* wm0 = mins + p * kInt8SliceBlocks * kR;
            const float* wm1 = mins + p1 * kInt8SliceBlocks * kR;
            float* tot = totals + ((xpi / 2) * (kGroup / 2) + p / 2) * 1024;
            if (has_mins) {
              slice_kernel<true>(a0, a1, ws0, ws1, wm0, wm1, xb0, xb1, nbk, tot, mt1 > 0, nr1 > 0, b0 == 0);
            } else {
              slice_kernel<false>(a0, a1, ws0, ws1, wm0, wm1, xb0, xb1, nbk, tot, mt1 > 0, nr1 > 0, b0 == 0);
            }
          }
          prefetcher.part(xpi / 2);
        }
      }
      // The group's outputs, summed slice by slice in the totals, go to y once.
      for (int64_t xpi = 0; xpi < n_xpanels; xpi += 2) {
        const int64_t t0 = xpi * kT;
        const int mt0 = static_cast<int>(std::min<int64_t>(kT, n - t0));
        const int mt1 = static_cast<int>(std::clamp<int64_t>(n - t0 - kT, 0, kT));
        for (int p = 0; p < np; p += 2) {
          const int64_t pr0 = r0 + p * kR;
          const int nr0 = static_cast<int>(std::min<int64_t>(kR, w.rows - pr0));
          const int nr1 = static_cast<int>(std::clamp<int64_t>(w.rows - pr0 - kR, 0, kR));
          store_totals(totals + ((xpi / 2) * (kGroup / 2) + p / 2) * 1024, y + t0 * w.rows + pr0, w.rows, mt0, mt1, nr0,
                       nr1);
        }
      }
    }
    release_tiles();
  };
  pack_then_compute(pool, n, w.rows, k, pack, compute);
}

#else

bool amx_int8_usable() { return false; }

void matmul_q8_amx(const WeightView&, const float*, int64_t, float*, ThreadPool&) {
  fail("matmul_q8: this build has no AMX-INT8 GEMM");
}

#endif

}  // namespace kvslim::KVSLIM_ISA_NS::detail
