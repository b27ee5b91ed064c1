// bf16 GEMM for bf16 weights (AVX512-BF16): prefill's products at twice the f32 FMA rate.
//
// vdpbf16ps multiplies 16 pairs of bf16 values per instruction and adds both products of each
// pair to an f32 lane, so K is consumed two columns at a time. X is rounded to bf16 once (round
// to nearest even, as convert_from_f32 does; llama.cpp makes the same rounding for bf16
// weights) and packed in panels of kMR tokens as [k pair][token] 32-bit words; the weights are
// already bf16 and a panel of kNR rows is repacked per kKC slice as [k pair][row] words: 16
// rows x 16 words loaded and transposed in registers as if they were floats (the shuffles move
// bits unchanged). The kMR x kNR micro-kernel broadcasts one token's pair and runs two
// dot products against the two 16-row weight vectors. As in matmul.cpp, threads take chunks
// of weight panels from a queue and every output is computed by one thread in a fixed order,
// so results do not depend on the number of threads.
#include <algorithm>
#include <cstring>

#include "tensor/kernels.h"
#include "tensor/matmul_internal.h"
#include "tensor/ops.h"
#include "util/error.h"

#include "tensor/simd.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512BF16__)
#define KVSLIM_BF16_GEMM 1
#endif

namespace kvslim::detail {

#if defined(KVSLIM_BF16_GEMM)

namespace {

constexpr int kMR = 12;        // tokens per micro-tile
constexpr int kNR = 32;        // weight rows per micro-tile (two 16-lane vectors)
constexpr int64_t kKC = 512;   // columns per K slice (256 pairs; a multiple of 32)

// Packs tokens [t0, t0 + kMR) of x (n x k) as dst[p * kMR + t] = the bf16 pair (x[2p], x[2p+1])
// of token t for p < kp = ceil(k / 2); missing tokens and the odd tail are 0.
void pack_x_panel(const float* x, int64_t n, int64_t k, int64_t t0, uint32_t* dst) {
  const int64_t kp = (k + 1) / 2;
  const int mt = static_cast<int>(std::min<int64_t>(kMR, n - t0));
  if (mt < kMR) std::memset(dst, 0, static_cast<size_t>(kp) * kMR * 4);
  thread_local Scratch scratch;
  auto* row = static_cast<uint16_t*>(scratch.get(static_cast<size_t>(2 * kp) * 2));
  for (int t = 0; t < mt; ++t) {
    convert_from_f32(x + (t0 + t) * k, DType::BF16, row, k);
    if (k & 1) row[k] = 0;
    const auto* pairs = reinterpret_cast<const uint32_t*>(row);
    for (int64_t p = 0; p < kp; ++p) dst[p * kMR + t] = pairs[p];
  }
}

// Rows [r0, r0 + kNR) x columns [k0, k0 + kc) of w (kc even, or the row's odd end) as
// dst[p * kNR + j] = the pair (w[j][k0 + 2p], w[j][k0 + 2p + 1]); rows past the end and the odd
// tail are 0.
void pack_w_panel(const WeightView& w, int64_t r0, int64_t k0, int64_t kc, uint32_t* dst) {
  const int nr = static_cast<int>(std::min<int64_t>(kNR, w.rows - r0));
  const int64_t pairs = (kc + 1) / 2;
  for (int64_t p0 = 0; p0 < pairs; p0 += 16) {
    const int np = static_cast<int>(std::min<int64_t>(16, pairs - p0));
    // Values [k0 + 2 p0, ...) of a row: 2 * np of them, or one fewer at an odd row end.
    const int64_t vals = std::min<int64_t>(2 * np, w.cols - (k0 + 2 * p0));
    const __mmask32 m = vals >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((uint64_t{1} << vals) - 1);
    for (int half = 0; half < kNR / 16; ++half) {
      __m512 v[16];
      for (int i = 0; i < 16; ++i) {
        const int j = 16 * half + i;
        v[i] = j < nr ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(
                            m, reinterpret_cast<const uint16_t*>(w.row(r0 + j)) + k0 + 2 * p0))
                      : _mm512_setzero_ps();
      }
      transpose16x16(v);
      for (int c = 0; c < np; ++c)
        _mm512_storeu_ps(reinterpret_cast<float*>(dst + (p0 + c) * kNR + 16 * half), v[c]);
    }
  }
}

// C[t][j] (+)= sum over the kp pairs of xp[p][t] . wp[p][j] for t < mt, j < nr.
void micro_kernel(const uint32_t* xp, const uint32_t* wp, int64_t kp, float* c, int64_t ldc, int mt, int nr,
                  bool first) {
  __m512 acc[kMR][2];
#pragma GCC unroll 12
  for (int t = 0; t < kMR; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kp; ++p) {
    const __m512bh w0 = (__m512bh)_mm512_loadu_si512(wp + p * kNR);
    const __m512bh w1 = (__m512bh)_mm512_loadu_si512(wp + p * kNR + 16);
    const uint32_t* xk = xp + p * kMR;
#pragma GCC unroll 12
    for (int t = 0; t < kMR; ++t) {
      const __m512bh xb = (__m512bh)_mm512_set1_epi32(static_cast<int>(xk[t]));
      acc[t][0] = _mm512_dpbf16_ps(acc[t][0], w0, xb);
      acc[t][1] = _mm512_dpbf16_ps(acc[t][1], w1, xb);
    }
  }
  const __mmask16 m0 = nr >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << nr) - 1);
  const __mmask16 m1 = nr >= 32 ? static_cast<__mmask16>(0xffff)
                                : (nr > 16 ? static_cast<__mmask16>((1u << (nr - 16)) - 1) : static_cast<__mmask16>(0));
#pragma GCC unroll 12
  for (int t = 0; t < kMR; ++t) {
    if (t >= mt) break;
    float* ct = c + t * ldc;
    __m512 v0 = acc[t][0], v1 = acc[t][1];
    if (!first) {
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, ct));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, ct + 16));
    }
    _mm512_mask_storeu_ps(ct, m0, v0);
    _mm512_mask_storeu_ps(ct + 16, m1, v1);
  }
}

}  // namespace

bool matmul_bf16_available() { return true; }

void matmul_bf16(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  const int64_t k = w.cols;
  const int64_t kp = (k + 1) / 2;
  const int64_t n_xpanels = (n + kMR - 1) / kMR;
  const int64_t n_wpanels = (w.rows + kNR - 1) / kNR;
  const size_t xpanel_words = static_cast<size_t>(kp) * kMR;

  thread_local Scratch x_scratch;
  auto* xp = static_cast<uint32_t*>(x_scratch.get(static_cast<size_t>(n_xpanels) * xpanel_words * 4));

  const bool parallel = pool.size() > 1 && static_cast<double>(n) * w.rows * k > 2e6;
  auto pack = [&](int t, int nt) {
    for (int64_t p = n_xpanels * t / nt; p < n_xpanels * (t + 1) / nt; ++p)
      pack_x_panel(x, n, k, p * kMR, xp + p * xpanel_words);
  };
  // Weight panels go out in chunks of up to 4 (about 4 chunks per thread at least).
  ChunkQueue queue(n_wpanels, std::clamp<int64_t>(n_wpanels / (4 * pool.size()), 1, 4));
  auto compute = [&](int, int) {
    thread_local Scratch w_scratch;
    auto* wp = static_cast<uint32_t*>(w_scratch.get(static_cast<size_t>(kNR) * (kKC / 2) * 4));
    int64_t p0, p1;
    while (queue.pop(p0, p1)) {
      for (int64_t k0 = 0; k0 < k; k0 += kKC) {
        const int64_t kc = std::min(kKC, k - k0);
        for (int64_t p = p0; p < p1; ++p) {
          const int64_t r0 = p * kNR;
          const int nr = static_cast<int>(std::min<int64_t>(kNR, w.rows - r0));
          pack_w_panel(w, r0, k0, kc, wp);
          // The panel after this one: the next in this slice, or the first of the next slice.
          int64_t next_r0 = r0 + kNR, next_k0 = k0, next_kc = kc;
          if (p + 1 >= p1) {
            next_r0 = p0 * kNR;
            next_k0 = k0 + kKC;
            next_kc = std::min(kKC, k - next_k0);
          }
          const PanelPrefetcher prefetcher(w, next_r0, next_k0 < k ? std::min(w.rows, next_r0 + kNR) : next_r0,
                                           next_k0, next_k0 < k ? next_kc : 0, n_xpanels);
          for (int64_t xpi = 0; xpi < n_xpanels; ++xpi) {
            const int64_t t0 = xpi * kMR;
            const int mt = static_cast<int>(std::min<int64_t>(kMR, n - t0));
            micro_kernel(xp + xpi * xpanel_words + (k0 / 2) * kMR, wp, (kc + 1) / 2, y + t0 * w.rows + r0, w.rows,
                         mt, nr, k0 == 0);
            prefetcher.part(xpi);
          }
        }
      }
    }
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

bool matmul_bf16_available() { return false; }

void matmul_bf16(const WeightView&, const float*, int64_t, float*, ThreadPool&) {
  fail("matmul_bf16: this build has no AVX512-BF16 GEMM");
}

#endif

}  // namespace kvslim::detail
