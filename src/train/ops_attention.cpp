// Causal grouped-query attention, forward and backward, in query tiles: per (sequence, KV head)
// and query head, S = scale * Q_tile K^T over the keys the tile can see, a causal softmax per
// row, O = P V. The backward recomputes P with the identical product (so it is bitwise the
// forward's) and applies
//   dV += P^T dO,  dS = P * (dO V^T - rowsum(P * dO V^T)),  dQ = scale * dS K,  dK += scale * dS^T Q.
#include <algorithm>
#include <cmath>

#include "train/grad_ops.h"
#include "train/softmax_row.h"
#include "util/error.h"

namespace kvslim::train {

namespace {

constexpr int64_t kQueryTile = 128;

struct Strides {
  int64_t q, kv;  // floats between consecutive tokens of q/out and of k/v
};

// S[rows][cols] = causal softmax of scale * Q_tile K[0:cols]^T, row i seeing t0 + i + 1 keys.
template <class T>
void tile_probabilities(const T* q, const T* k, const Strides& st, int hd, int64_t t0, int64_t rows, T scale, T* s) {
  const int64_t cols = t0 + rows;
  gemm<T>(false, true, rows, cols, hd, scale, q + t0 * st.q, st.q, k, st.kv, T(0), s, cols);
  for (int64_t i = 0; i < rows; ++i) {
    T* row = s + i * cols;
    const int64_t visible = t0 + i + 1;
    softmax_row(row, visible);
    std::fill(row + visible, row + cols, T(0));
  }
}

// Per-thread tile scratch, kept between calls (a fresh multi-megabyte buffer per call would be
// page-faulted in every time). Slot picks one of several buffers a function needs at once.
template <class T, int Slot>
T* tile_buffer(size_t size) {
  thread_local std::vector<T> buffer;
  if (buffer.size() < size) buffer.resize(size);
  return buffer.data();
}

// Calls fn(begin, length, kv_head) for every (sequence, KV head) pair, split across threads.
template <class F>
void for_each_sequence_head(const std::vector<int64_t>& seq_starts, int n_kv_heads, ThreadPool& pool, F&& fn) {
  if (seq_starts.empty()) fail("attention: seq_starts must hold at least the end offset");
  const int64_t n_seqs = int64_t(seq_starts.size()) - 1;
  for (int64_t s = 0; s < n_seqs; ++s)
    if (seq_starts[s + 1] < seq_starts[s]) fail("attention: sequence starts must not decrease");
  pool.parallel_for_fn(n_seqs * n_kv_heads, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t s = item / n_kv_heads;
      fn(seq_starts[s], seq_starts[s + 1] - seq_starts[s], int(item % n_kv_heads));
    }
  });
}

void check_shape(const AttentionShape& a) {
  if (a.n_heads < 1 || a.n_kv_heads < 1 || a.head_dim < 1 || a.n_heads % a.n_kv_heads != 0)
    fail("attention: {} query heads, {} KV heads of size {} (need positive sizes, heads a multiple of KV heads)",
         a.n_heads, a.n_kv_heads, a.head_dim);
}

}  // namespace

template <class T>
void attention_forward(const T* q, const T* k, const T* v, const std::vector<int64_t>& seq_starts,
                       const AttentionShape& shape, T* out, ThreadPool& pool) {
  check_shape(shape);
  const int hd = shape.head_dim, group = shape.n_heads / shape.n_kv_heads;
  const Strides st{int64_t(shape.n_heads) * hd, int64_t(shape.n_kv_heads) * hd};
  const T scale = T(1) / std::sqrt(T(hd));
  for_each_sequence_head(seq_starts, shape.n_kv_heads, pool, [&](int64_t begin, int64_t n, int g) {
    T* s = tile_buffer<T, 0>(size_t(std::min(n, kQueryTile) * n));
    const T* kg = k + begin * st.kv + int64_t(g) * hd;
    const T* vg = v + begin * st.kv + int64_t(g) * hd;
    for (int h = g * group; h < (g + 1) * group; ++h) {
      const T* qh = q + begin * st.q + int64_t(h) * hd;
      T* oh = out + begin * st.q + int64_t(h) * hd;
      for (int64_t t0 = 0; t0 < n; t0 += kQueryTile) {
        const int64_t rows = std::min(kQueryTile, n - t0), cols = t0 + rows;
        tile_probabilities(qh, kg, st, hd, t0, rows, scale, s);
        gemm<T>(false, false, rows, hd, cols, T(1), s, cols, vg, st.kv, T(0), oh + t0 * st.q, st.q);
      }
    }
  });
}

template <class T>
void attention_backward(const T* q, const T* k, const T* v, const T* d_out, const std::vector<int64_t>& seq_starts,
                        const AttentionShape& shape, T* dq, T* dk, T* dv, ThreadPool& pool) {
  check_shape(shape);
  const int hd = shape.head_dim, group = shape.n_heads / shape.n_kv_heads;
  const Strides st{int64_t(shape.n_heads) * hd, int64_t(shape.n_kv_heads) * hd};
  const T scale = T(1) / std::sqrt(T(hd));
  for_each_sequence_head(seq_starts, shape.n_kv_heads, pool, [&](int64_t begin, int64_t n, int g) {
    const size_t tile_size = size_t(std::min(n, kQueryTile) * n);
    T* p = tile_buffer<T, 0>(tile_size);
    T* dp = tile_buffer<T, 1>(tile_size);
    const T* kg = k + begin * st.kv + int64_t(g) * hd;
    const T* vg = v + begin * st.kv + int64_t(g) * hd;
    T* dkg = dk + begin * st.kv + int64_t(g) * hd;
    T* dvg = dv + begin * st.kv + int64_t(g) * hd;
    for (int64_t t = 0; t < n; ++t) {
      std::fill_n(dkg + t * st.kv, hd, T(0));
      std::fill_n(dvg + t * st.kv, hd, T(0));
    }
    for (int h = g * group; h < (g + 1) * group; ++h) {
      const T* qh = q + begin * st.q + int64_t(h) * hd;
      const T* doh = d_out + begin * st.q + int64_t(h) * hd;
      T* dqh = dq + begin * st.q + int64_t(h) * hd;
      for (int64_t t0 = 0; t0 < n; t0 += kQueryTile) {
        const int64_t rows = std::min(kQueryTile, n - t0), cols = t0 + rows;
        tile_probabilities(qh, kg, st, hd, t0, rows, scale, p);
        gemm<T>(true, false, cols, hd, rows, T(1), p, cols, doh + t0 * st.q, st.q, T(1), dvg, st.kv);
        gemm<T>(false, true, rows, cols, hd, T(1), doh + t0 * st.q, st.q, vg, st.kv, T(0), dp, cols);
        for (int64_t i = 0; i < rows; ++i) {
          T* pr = p + i * cols;
          const T* dpr = dp + i * cols;
          const int64_t visible = t0 + i + 1;
          T d = 0;
          for (int64_t j = 0; j < visible; ++j) d += pr[j] * dpr[j];
          for (int64_t j = 0; j < visible; ++j) pr[j] *= dpr[j] - d;  // p now holds dS
        }
        gemm<T>(false, false, rows, hd, cols, scale, p, cols, kg, st.kv, T(0), dqh + t0 * st.q, st.q);
        gemm<T>(true, false, cols, hd, rows, scale, p, cols, qh + t0 * st.q, st.q, T(1), dkg, st.kv);
      }
    }
  });
}

template void attention_forward<float>(const float*, const float*, const float*, const std::vector<int64_t>&,
                                       const AttentionShape&, float*, ThreadPool&);
template void attention_forward<double>(const double*, const double*, const double*, const std::vector<int64_t>&,
                                        const AttentionShape&, double*, ThreadPool&);
template void attention_backward<float>(const float*, const float*, const float*, const float*,
                                        const std::vector<int64_t>&, const AttentionShape&, float*, float*, float*,
                                        ThreadPool&);
template void attention_backward<double>(const double*, const double*, const double*, const double*,
                                         const std::vector<int64_t>&, const AttentionShape&, double*, double*, double*,
                                         ThreadPool&);

}  // namespace kvslim::train
