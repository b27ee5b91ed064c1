// Causal grouped-query attention, forward and backward, in query tiles: per (sequence, KV head)
// and tile of queries of all the heads sharing that KV head, S = scale * Q_tile K^T over the
// keys the tile can see, a causal softmax per row, O = P V. The backward recomputes P with the identical product (so it is bitwise the
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

// Per-thread tile scratch, kept between calls (a fresh multi-megabyte buffer per call would be
// page-faulted in every time). Slot picks one of several buffers a function needs at once.
template <class T, int Slot>
T* tile_buffer(size_t size) {
  thread_local std::vector<T> buffer;
  if (buffer.size() < size) buffer.resize(size);
  return buffer.data();
}

// One query tile of one (sequence, KV head): the `group` query heads that share the KV head are
// stacked into one matrix of group * rows rows (row r: head r / rows, query t0 + r % rows), so
// each product reads K and V once for the whole group.
template <class T>
struct Tile {
  int hd, group;
  int64_t t0, rows, cols;  // cols = t0 + rows: the keys the tile's last query sees
  int64_t stacked() const { return group * rows; }

  // dst[stacked][hd] <- rows t0.. of the group's heads in src ([tokens][stride], heads from h0).
  void gather(const T* src, int64_t stride, int h0, T* dst) const {
    for (int j = 0; j < group; ++j)
      for (int64_t i = 0; i < rows; ++i)
        std::copy_n(src + (t0 + i) * stride + int64_t(h0 + j) * hd, hd, dst + (j * rows + i) * hd);
  }
  void scatter(const T* src, int64_t stride, int h0, T* dst) const {
    for (int j = 0; j < group; ++j)
      for (int64_t i = 0; i < rows; ++i)
        std::copy_n(src + (j * rows + i) * hd, hd, dst + (t0 + i) * stride + int64_t(h0 + j) * hd);
  }

  // s[stacked][cols] = causal softmax of scale * qs K[0:cols]^T; row r sees t0 + r % rows + 1 keys.
  void probabilities(const T* qs, const T* k, int64_t k_stride, T scale, T* s) const {
    gemm<T>(false, true, stacked(), cols, hd, scale, qs, hd, k, k_stride, T(0), s, cols);
    for (int64_t r = 0; r < stacked(); ++r) {
      T* row = s + r * cols;
      const int64_t visible = t0 + r % rows + 1;
      softmax_row(row, visible);
      std::fill(row + visible, row + cols, T(0));
    }
  }
};

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
  const int64_t q_stride = int64_t(shape.n_heads) * hd, kv_stride = int64_t(shape.n_kv_heads) * hd;
  const T scale = T(1) / std::sqrt(T(hd));
  for_each_sequence_head(seq_starts, shape.n_kv_heads, pool, [&](int64_t begin, int64_t n, int g) {
    const int64_t tile = std::min(n, kQueryTile);
    T* s = tile_buffer<T, 0>(size_t(group * tile * n));
    T* qs = tile_buffer<T, 1>(size_t(group * tile * hd));
    T* os = tile_buffer<T, 2>(size_t(group * tile * hd));
    const T* kg = k + begin * kv_stride + int64_t(g) * hd;
    const T* vg = v + begin * kv_stride + int64_t(g) * hd;
    for (int64_t t0 = 0; t0 < n; t0 += kQueryTile) {
      const int64_t rows = std::min(kQueryTile, n - t0);
      const Tile<T> t{hd, group, t0, rows, t0 + rows};
      t.gather(q + begin * q_stride, q_stride, g * group, qs);
      t.probabilities(qs, kg, kv_stride, scale, s);
      gemm<T>(false, false, t.stacked(), hd, t.cols, T(1), s, t.cols, vg, kv_stride, T(0), os, hd);
      t.scatter(os, q_stride, g * group, out + begin * q_stride);
    }
  });
}

template <class T>
void attention_backward(const T* q, const T* k, const T* v, const T* d_out, const std::vector<int64_t>& seq_starts,
                        const AttentionShape& shape, T* dq, T* dk, T* dv, ThreadPool& pool) {
  check_shape(shape);
  const int hd = shape.head_dim, group = shape.n_heads / shape.n_kv_heads;
  const int64_t q_stride = int64_t(shape.n_heads) * hd, kv_stride = int64_t(shape.n_kv_heads) * hd;
  const T scale = T(1) / std::sqrt(T(hd));
  for_each_sequence_head(seq_starts, shape.n_kv_heads, pool, [&](int64_t begin, int64_t n, int g) {
    const int64_t tile = std::min(n, kQueryTile);
    T* p = tile_buffer<T, 0>(size_t(group * tile * n));
    T* dp = tile_buffer<T, 3>(size_t(group * tile * n));
    T* qs = tile_buffer<T, 1>(size_t(group * tile * hd));
    T* dos = tile_buffer<T, 2>(size_t(group * tile * hd));
    T* dqs = tile_buffer<T, 4>(size_t(group * tile * hd));
    const T* kg = k + begin * kv_stride + int64_t(g) * hd;
    const T* vg = v + begin * kv_stride + int64_t(g) * hd;
    T* dkg = dk + begin * kv_stride + int64_t(g) * hd;
    T* dvg = dv + begin * kv_stride + int64_t(g) * hd;
    for (int64_t t = 0; t < n; ++t) {
      std::fill_n(dkg + t * kv_stride, hd, T(0));
      std::fill_n(dvg + t * kv_stride, hd, T(0));
    }
    for (int64_t t0 = 0; t0 < n; t0 += kQueryTile) {
      const int64_t rows = std::min(kQueryTile, n - t0);
      const Tile<T> t{hd, group, t0, rows, t0 + rows};
      const int64_t m = t.stacked(), cols = t.cols;
      t.gather(q + begin * q_stride, q_stride, g * group, qs);
      t.gather(d_out + begin * q_stride, q_stride, g * group, dos);
      t.probabilities(qs, kg, kv_stride, scale, p);
      gemm<T>(true, false, cols, hd, m, T(1), p, cols, dos, hd, T(1), dvg, kv_stride);
      gemm<T>(false, true, m, cols, hd, T(1), dos, hd, vg, kv_stride, T(0), dp, cols);
      for (int64_t r = 0; r < m; ++r) {
        T* pr = p + r * cols;
        const T* dpr = dp + r * cols;
        const int64_t visible = t0 + r % rows + 1;
        T d = 0;
        for (int64_t j = 0; j < visible; ++j) d += pr[j] * dpr[j];
        for (int64_t j = 0; j < visible; ++j) pr[j] *= dpr[j] - d;  // p now holds dS
      }
      gemm<T>(false, false, m, hd, cols, scale, p, cols, kg, kv_stride, T(0), dqs, hd);
      gemm<T>(true, false, cols, hd, m, scale, p, cols, qs, hd, T(1), dkg, kv_stride);
      t.scatter(dqs, q_stride, g * group, dq + begin * q_stride);
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
                                         const std::vector<int64_t>&, const AttentionShape&, double*, double*,
                                         double*, ThreadPool&);

}  // namespace kvslim::train
