// F16 and BF16 prefill, and prefill attention's f32 products, on AMX-BF16 tiles (Sapphire Rapids
// and later), as exact as the f32 GEMM.
//
// A tile product multiplies bf16 values (8-bit significands) and sums in f32. Rounding x or the
// weights to bf16 would lose precision, so both are split into sums of bf16 terms that are exact:
//   x = x1 + x2 + x3  (each the previous remainder rounded to bf16: 24 = 3 x 8 significant bits),
//   w = w1 + w2       (f16 has 11 significant bits; a bf16 weight is w1 alone; f32 takes three).
// Each product of two terms is exact in f32. A value's second term is at most 2^-8 of it and its
// third 2^-17, so leaving out the products wi xj with i + j > 4 (w2 x3 and w3 x2) loses under
// 2^-25 |w x| each, half a unit in the last place of an f32 product. So an F16 weight costs five
// tile products, a BF16 weight three and an f32 operand six, and the result is the exact sum of
// exact products, rounded as an f32 GEMM rounds its sums. A tile product (16 x 16 outputs, 32
// deep) runs in 16 cycles: 512 multiply-adds a cycle, against 32 for AVX-512 FMAs.
//
// Layout. A tiles are x: 16 tokens x 32 k of one term (rows of 64 bytes), so C tiles are
// 16 tokens x 16 weight rows of f32, already in y's orientation. B tiles are a weight panel:
// 16 pairs of k x 16 rows x 2 bf16 (the layout TDPBF16PS reads), made by transposing 16 rows of
// 16 pairs in registers. X is split and packed once per call (threads share the token panels);
// threads take groups of 8 weight panels (128 rows) from a queue, pack a group's K slice of 64,
// and run every pair of token panels against every pair of its weight panels, the four C tiles
// staying in tile registers across the slice. Sums over slices build up in a per-thread buffer
// that goes to y once per group, so each output is computed by one thread in a fixed order.
// Attention's products (gemm_f32_nt / _nn, f32 on both sides) run the same way on the calling
// thread; for _nn the B tiles interleave pairs of consecutive value rows instead of transposing.
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

#if defined(__x86_64__) && defined(KVSLIM_HAS_AVX512BF16)
#define KVSLIM_AMX_BF16_GEMM 1
#endif

namespace kvslim::KVSLIM_ISA_NS::detail {

#if defined(KVSLIM_AMX_BF16_GEMM)

namespace {

constexpr int kT = 16;               // tokens per A tile (its rows)
constexpr int kR = 16;               // weight rows per B tile (its columns)
constexpr int64_t kKT = 32;          // k per tile product: 16 pairs
constexpr size_t kTileBytes = 1024;  // every tile: 16 rows of 64 bytes
constexpr int kXTerms = 3;           // x1, x2, x3
constexpr int kWTerms = 3;           // at most w1, w2, w3: 1 for bf16, 2 for f16, 3 for f32
constexpr int64_t kSliceChunks = 2;  // K slice: 2 tile products deep (64 k; 128 and 256 measured slower)
constexpr int kGroup = 8;            // weight panels per group (128 rows)
constexpr size_t kXChunkBytes = kXTerms * kTileBytes;  // one token panel's 32 k, all terms
// A weight panel's slice: [chunk][term][tile], with the terms its type needs.
constexpr size_t w_panel_bytes(int wterms) { return kSliceChunks * wterms * kTileBytes; }

// Tile registers 0-3: C; 4-5: A (x of two token panels); 6-7: B (two weight panels). All 16 rows
// of 64 bytes.
void load_bf16_tile_config() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  load_tile_config(cfg);
}

// v rounded to the nearest bf16 (ties to even), still as f32. Values near FLT_MAX may round to
// infinity, as a bf16 conversion would.
inline __m512 round_to_bf16(__m512 v) {
  const __m512i b = _mm512_castps_si512(v);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_add_epi32(b, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd));
  return _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
}

// 32 values (lo: the first 16, hi: the next 16) as bf16 terms t[0..kTerms): each term is the
// remainder so far rounded to bf16, so the terms add up to the values exactly (3 terms for f32,
// 2 for f16). Every term is a bf16 already, so the packing conversion is exact.
template <int kTerms>
inline void split_terms(__m512 lo, __m512 hi, __m512i t[kTerms]) {
#pragma GCC unroll 3
  for (int i = 0; i < kTerms; ++i) {
    const __m512 rl = round_to_bf16(lo), rh = round_to_bf16(hi);
    t[i] = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(rh, rl));
    lo = _mm512_sub_ps(lo, rl);
    hi = _mm512_sub_ps(hi, rh);
  }
}

// The same with the number of terms known at run time (2 or 3; t[2] is left alone for 2).
inline void split_terms(int terms, __m512 lo, __m512 hi, __m512i t[kWTerms]) {
  if (terms == 3) {
    split_terms<3>(lo, hi, t);
  } else {
    split_terms<2>(lo, hi, t);
  }
}

// Masks of the first and second 16 of a chunk's `left` valid columns.
inline void chunk_masks(int64_t left, __mmask16& m0, __mmask16& m1) {
  m0 = first_lanes16(left);
  m1 = first_lanes16(left - 16);
}

// Token panel t0 of x (n rows of k, ldx floats apart), split and packed as
// [chunk][term][16 tokens][32 bf16]; tokens past n and columns past k are 0.
void pack_x_panel(const float* x, int64_t ldx, int64_t n, int64_t k, int64_t t0, uint8_t* dst) {
  const int64_t chunks = (k + kKT - 1) / kKT;
  const int mt = static_cast<int>(std::min<int64_t>(kT, n - t0));
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t k0 = c * kKT;
    const int64_t left = std::min<int64_t>(kKT, k - k0);
    __mmask16 m0, m1;
    chunk_masks(left, m0, m1);
    uint8_t* chunk = dst + c * kXChunkBytes;
    for (int t = 0; t < kT; ++t) {
      __m512i terms[kXTerms];
      if (t < mt) {
        const float* row = x + (t0 + t) * ldx + k0;
        split_terms<kXTerms>(_mm512_maskz_loadu_ps(m0, row), _mm512_maskz_loadu_ps(m1, row + 16), terms);
      } else {
        for (auto& term : terms) term = _mm512_setzero_si512();
      }
      for (int i = 0; i < kXTerms; ++i) _mm512_store_si512(chunk + i * kTileBytes + t * 64, terms[i]);
    }
  }
}

// 32 values of an f16, bf16 or f32 row from column k0 (masked: the rest are 0) as f32.
inline void load_row32(DType type, const uint8_t* row, int64_t k0, __mmask16 m0, __mmask16 m1, __m512& lo, __m512& hi) {
  if (type == DType::F32) {
    const float* f = reinterpret_cast<const float*>(row) + k0;
    lo = _mm512_maskz_loadu_ps(m0, f);
    hi = _mm512_maskz_loadu_ps(m1, f + 16);
    return;
  }
  const auto* h = reinterpret_cast<const uint16_t*>(row) + k0;
  const __m256i a = _mm256_maskz_loadu_epi16(m0, h), b = _mm256_maskz_loadu_epi16(m1, h + 16);
  if (type == DType::F16) {
    lo = _mm512_cvtph_ps(a);
    hi = _mm512_cvtph_ps(b);
  } else {  // BF16: the upper half of an f32
    lo = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(a), 16));
    hi = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
  }
}

// Rows [r0, r0 + 16 * np) x chunks [c0, c0 + nc) of w (f16, bf16 or f32, in wterms terms) into a
// group's slice, per panel [chunk][term][16 pairs][16 rows][2 bf16]; rows past the end and columns
// past k are 0. Each row's slice is read in one sweep (prefetching what follows) and split into
// `stage` ([chunk][term][row][16 pairs]); each chunk's terms are then transposed into B tiles.
void pack_w_group(const WeightView& w, int wterms, int64_t r0, int np, int64_t c0, int64_t nc, uint8_t* dst) {
  const size_t stride = row_bytes(w.type, w.cols);
  const int64_t k0 = c0 * kKT, k1 = std::min(w.cols, (c0 + nc) * kKT);
  const auto* base = static_cast<const uint8_t*>(w.data) + row_bytes(w.type, k0);
  const size_t slice_bytes = row_bytes(w.type, k1 - k0);
  // What each row prefetches: its next two slices (the first of them mostly on its way already),
  // one line more where the row's slice does not start on a line.
  const int64_t ahead = std::min(w.cols, k1 + 2 * kSliceChunks * kKT) - k1;
  const size_t ahead_bytes = ahead > 0 ? row_bytes(w.type, ahead) + 64 : 0;
  alignas(64) uint8_t stage[kSliceChunks][kWTerms][kR][64];
  for (int p = 0; p < np; ++p) {
    for (int j = 0; j < kR; ++j) {
      const int64_t r = r0 + p * kR + j;
      const uint8_t* row = r < w.rows ? base + static_cast<size_t>(r) * stride : nullptr;
      // Rows lie a multiple of 4 KiB apart, so a group's slice sits in one set of L1 and the
      // hardware prefetchers see 128 short streams: without this the unpacking waited on memory.
      if (row != nullptr) {
        for (size_t b = 0; b < ahead_bytes; b += 64) detail::prefetch_l2(row, slice_bytes + b);
      }
      for (int64_t c = 0; c < nc; ++c) {
        __m512i t[kWTerms] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
        if (row != nullptr) {
          const int64_t left = std::min<int64_t>(kKT, w.cols - (c0 + c) * kKT);
          __m512 lo, hi;
          if (left == kKT) {
            load_row32(w.type, row, c * kKT, 0xffff, 0xffff, lo, hi);
          } else {
            __mmask16 m0, m1;
            chunk_masks(left, m0, m1);
            load_row32(w.type, row, c * kKT, m0, m1, lo, hi);
          }
          split_terms(std::max(wterms, 2), lo, hi, t);
        }
        for (int i = 0; i < wterms; ++i) _mm512_store_si512(stage[c][i][j], t[i]);
      }
    }
    for (int64_t c = 0; c < nc; ++c) {
      for (int i = 0; i < wterms; ++i) {
        __m512 v[kR];  // row j's 16 pairs, then (transposed) pair j's 16 rows
        for (int j = 0; j < kR; ++j) v[j] = _mm512_load_ps(stage[c][i][j]);
        transpose16x16_ps(v);
        uint8_t* tile = dst + p * w_panel_bytes(wterms) + (c * wterms + i) * kTileBytes;
        for (int j = 0; j < kR; ++j) _mm512_store_ps(tile + j * 64, v[j]);
      }
    }
  }
}

// The same slice of W = V^T for V given as its rows (vt: k rows of `rows` floats, as attention
// stores values token-major): B tile row q of a panel holds the pairs (V[2q][d], V[2q + 1][d]) of
// its 16 columns d, so two value rows are split into terms and their 16-bit halves interleaved.
void pack_wt_group(const float* vt, int64_t rows, int64_t k, int64_t r0, int np, int64_t c0, int64_t nc, uint8_t* dst) {
  // bf16 i of the first row's 16, then bf16 i of the second's: [a0 b0 a1 b1 ...].
  alignas(64) static constexpr int16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                          8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i order = _mm512_load_si512(kInterleave);
  for (int p = 0; p < np; ++p) {
    const int64_t d0 = r0 + p * kR;
    const int64_t live = std::clamp<int64_t>(rows - d0, 0, kR);
    const __mmask16 dm = first_lanes16(live);
    for (int64_t c = 0; c < nc; ++c) {
      uint8_t* chunk = dst + p * w_panel_bytes(kWTerms) + c * kWTerms * kTileBytes;
      for (int q = 0; q < 16; ++q) {
        const int64_t kk = (c0 + c) * kKT + 2 * q;
        const __m512 a = kk < k ? _mm512_maskz_loadu_ps(dm, vt + kk * rows + d0) : _mm512_setzero_ps();
        const __m512 b = kk + 1 < k ? _mm512_maskz_loadu_ps(dm, vt + (kk + 1) * rows + d0) : _mm512_setzero_ps();
        __m512i t[kWTerms];
        split_terms<kWTerms>(a, b, t);
        for (int i = 0; i < kWTerms; ++i) {
          _mm512_store_si512(chunk + i * kTileBytes + q * 64, _mm512_permutexvar_epi16(order, t[i]));
        }
      }
    }
  }
}

// One K slice (nc chunks) of two token panels (x0, x1) times two weight panels (w0, w1) into the
// four 16 x 16 [token][row] totals at tot (tile 2i + j: tokens 16i.., rows 16j..): stored on the
// first slice, added to on later ones. wterms: the weight panels' terms per chunk (1-3).
__attribute__((target("amx-tile,amx-bf16"))) void slice_kernel(const uint8_t* x0, const uint8_t* x1, const uint8_t* w0,
                                                               const uint8_t* w1, int64_t nc, int wterms, float* tot,
                                                               bool first) {
  // GCC 12's _tile_loadd declares no memory operand: without this barrier the stores that
  // packed the panels could be moved past the tile loads that read them.
  asm volatile("" : : : "memory");
  if (first) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  } else {
    _tile_loadd(0, tot + 0 * 256, 64);
    _tile_loadd(1, tot + 1 * 256, 64);
    _tile_loadd(2, tot + 2 * 256, 64);
    _tile_loadd(3, tot + 3 * 256, 64);
  }
  for (int64_t c = 0; c < nc; ++c) {
    const uint8_t* xa = x0 + c * kXChunkBytes;
    const uint8_t* xb = x1 + c * kXChunkBytes;
    const uint8_t* wa = w0 + c * wterms * kTileBytes;
    const uint8_t* wb = w1 + c * wterms * kTileBytes;
    for (int i = 0; i < wterms; ++i) {
      _tile_loadd(6, wa + i * kTileBytes, 64);
      _tile_loadd(7, wb + i * kTileBytes, 64);
      // wi meets x1 .. x(4 - i): w1 all three, w2 x1 and x2, w3 x1 (the rest is below an f32
      // product's rounding).
      for (int j = 0; j < kXTerms - i; ++j) {
        _tile_loadd(4, xa + j * kTileBytes, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_loadd(5, xb + j * kTileBytes, 64);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
    }
  }
  _tile_stored(0, tot + 0 * 256, 64);
  _tile_stored(1, tot + 1 * 256, 64);
  _tile_stored(2, tot + 2 * 256, 64);
  _tile_stored(3, tot + 3 * 256, 64);
  asm volatile("" : : : "memory");  // the totals are read with ordinary loads next
}

// Four [token][row] totals (tile 2i + j: tokens 16i.., rows 16j..) to y (or added to y),
// tokens t < mt0 / mt1 and rows r < nr0 / nr1 of each.
void store_totals(const float* tot, float* y, int64_t ldy, int mt0, int mt1, int nr0, int nr1, bool accumulate) {
  for (int j = 0; j < 2; ++j) {
    const int nr = j == 0 ? nr0 : nr1;
    if (nr <= 0) continue;
    const __mmask16 m = first_lanes16(nr);
    for (int i = 0; i < 2; ++i) {
      const int mt = i == 0 ? mt0 : mt1;
      const float* tile = tot + 256 * (2 * i + j);
      for (int t = 0; t < mt; ++t) {
        float* yt = y + (16 * i + t) * ldy + 16 * j;
        __m512 v = _mm512_load_ps(tile + 16 * t);
        if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, yt));
        _mm512_mask_storeu_ps(yt, m, v);
      }
    }
  }
}

// Y = X W^T for a W of `rows` rows and k columns, in wterms terms, whose group slices
// pack_group(r0, np, c0, nc, dst) packs; on the pool's threads, or on this one when pool is null.
template <class PackGroup>
void tile_gemm(int64_t rows, int64_t k, int wterms, const GemmOperands& op, ThreadPool* pool, PackGroup&& pack_group) {
  const int64_t n = op.n;
  const int64_t chunks = (k + kKT - 1) / kKT;
  const int64_t n_xpanels = (n + kT - 1) / kT;
  const int64_t n_groups = (rows + kGroup * kR - 1) / (kGroup * kR);
  const size_t xpanel_bytes = static_cast<size_t>(chunks) * kXChunkBytes;
  const size_t wpanel_bytes = w_panel_bytes(wterms);

  thread_local Scratch x_scratch;
  auto* xp = static_cast<uint8_t*>(x_scratch.get(static_cast<size_t>(n_xpanels) * xpanel_bytes));
  auto pack = [&](int t, int nt) {
    for (int64_t p = n_xpanels * t / nt; p < n_xpanels * (t + 1) / nt; ++p) {
      pack_x_panel(op.x, op.ldx, n, k, p * kT, xp + p * xpanel_bytes);
    }
  };
  detail::ChunkQueue queue(n_groups, 1);
  auto compute = [&](int, int) {
    thread_local Scratch w_scratch;
    auto* wp = static_cast<uint8_t*>(w_scratch.get(kGroup * w_panel_bytes(kWTerms)));
    // [token pair][panel pair][4 tiles][16 tokens][16 rows]: a group's outputs over all slices.
    thread_local Scratch t_scratch;
    auto* totals =
        static_cast<float*>(t_scratch.get(static_cast<size_t>((n_xpanels + 1) / 2) * (kGroup / 2) * 1024 * 4));
    load_bf16_tile_config();
    int64_t g0, g1;
    while (queue.pop(g0, g1)) {
      const int64_t r0 = g0 * kGroup * kR;
      const int np = static_cast<int>(std::min<int64_t>(kGroup, (rows - r0 + kR - 1) / kR));
      for (int64_t c0 = 0; c0 < chunks; c0 += kSliceChunks) {
        const int64_t nc = std::min(kSliceChunks, chunks - c0);
        pack_group(r0, np, c0, nc, wp);
        for (int64_t xpi = 0; xpi < n_xpanels; xpi += 2) {
          const uint8_t* xa = xp + xpi * xpanel_bytes + c0 * kXChunkBytes;
          const uint8_t* xb = xpi + 1 < n_xpanels ? xa + xpanel_bytes : xa;  // a real panel either way
          for (int p = 0; p < np; p += 2) {
            const uint8_t* wa = wp + p * wpanel_bytes;
            const uint8_t* wb = p + 1 < np ? wa + wpanel_bytes : wa;
            slice_kernel(xa, xb, wa, wb, nc, wterms, totals + ((xpi / 2) * (kGroup / 2) + p / 2) * 1024, c0 == 0);
          }
        }
      }
      // The group's outputs, summed slice by slice in the totals, go to y once.
      for (int64_t xpi = 0; xpi < n_xpanels; xpi += 2) {
        const int64_t t0 = xpi * kT;
        const int mt0 = static_cast<int>(std::min<int64_t>(kT, n - t0));
        const int mt1 = static_cast<int>(std::clamp<int64_t>(n - t0 - kT, 0, kT));
        for (int p = 0; p < np; p += 2) {
          const int64_t pr0 = r0 + p * kR;
          const int nr0 = static_cast<int>(std::min<int64_t>(kR, rows - pr0));
          const int nr1 = static_cast<int>(std::clamp<int64_t>(rows - pr0 - kR, 0, kR));
          store_totals(totals + ((xpi / 2) * (kGroup / 2) + p / 2) * 1024, op.y + t0 * op.ldy + pr0, op.ldy, mt0, mt1,
                       nr0, nr1, op.accumulate);
        }
      }
    }
    release_tiles();
  };
  if (pool != nullptr) {
    pack_then_compute(*pool, n, rows, k, pack, compute);
  } else {
    pack(0, 1);
    compute(0, 1);
  }
}

void require_usable(const char* what) {
  if (!amx_bf16_usable()) fail("{}: AMX-BF16 is not usable on this machine", what);
}

}  // namespace

bool amx_bf16_usable() {
  static const bool usable = amx_granted(kAmxBf16Bit);
  return usable;
}

void matmul_bf16_amx(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  if (w.type != DType::F16 && w.type != DType::BF16) {
    fail("matmul_bf16_amx: {} weights; this GEMM takes f16 and bf16", dtype_name(w.type));
  }
  require_usable("matmul_bf16_amx");
  const int wterms = w.type == DType::F16 ? 2 : 1;
  tile_gemm(
      w.rows, w.cols, wterms, GemmOperands{x, w.cols, n, y, w.rows, false}, &pool,
      [&](int64_t r0, int np, int64_t c0, int64_t nc, uint8_t* dst) { pack_w_group(w, wterms, r0, np, c0, nc, dst); });
}

void gemm_f32_nt_amx(const float* x, int64_t ldx, int64_t n, const float* w, int64_t w_rows, int64_t k, float* y,
                     int64_t ldy, bool accumulate) {
  require_usable("gemm_f32_nt_amx");
  const WeightView wv{DType::F32, w, w_rows, k};
  tile_gemm(w_rows, k, kWTerms, GemmOperands{x, ldx, n, y, ldy, accumulate}, nullptr,
            [&](int64_t r0, int np, int64_t c0, int64_t nc, uint8_t* dst) {
              pack_w_group(wv, kWTerms, r0, np, c0, nc, dst);
            });
}

void gemm_f32_nn_amx(const float* x, int64_t ldx, int64_t n, const float* w, int64_t k, int64_t w_cols, float* y,
                     int64_t ldy, bool accumulate) {
  require_usable("gemm_f32_nn_amx");
  tile_gemm(w_cols, k, kWTerms, GemmOperands{x, ldx, n, y, ldy, accumulate}, nullptr,
            [&](int64_t r0, int np, int64_t c0, int64_t nc, uint8_t* dst) {
              pack_wt_group(w, w_cols, k, r0, np, c0, nc, dst);
            });
}

#else

bool amx_bf16_usable() { return false; }

void matmul_bf16_amx(const WeightView&, const float*, int64_t, float*, ThreadPool&) {
  fail("matmul_bf16_amx: this level has no AMX-BF16 GEMM");
}

void gemm_f32_nt_amx(const float*, int64_t, int64_t, const float*, int64_t, int64_t, float*, int64_t, bool) {
  fail("gemm_f32_nt_amx: this level has no AMX-BF16 GEMM");
}

void gemm_f32_nn_amx(const float*, int64_t, int64_t, const float*, int64_t, int64_t, float*, int64_t, bool) {
  fail("gemm_f32_nn_amx: this level has no AMX-BF16 GEMM");
}

#endif

}  // namespace kvslim::KVSLIM_ISA_NS::detail
