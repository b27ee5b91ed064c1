// Linear maps y = x W^T + b and their backward, as row-partitioned OpenBLAS products: each
// thread of the pool runs a single-threaded product over its own rows (see train_model.h for
// why OpenBLAS's own threads stay off).
#include "train/grad_ops.h"

namespace kvslim::train {

namespace {
// Rows per task: whole cache-friendly blocks, so small products stay on one thread.
constexpr int64_t kRowGrain = 16;
}  // namespace

template <class T>
void linear_forward(const T* x, const T* w, const T* b, int64_t n, int in, int out, T* y, ThreadPool& pool) {
  pool.parallel_for_fn(
      n,
      [&](int64_t t0, int64_t t1) {
        gemm<T>(false, true, t1 - t0, out, in, T(1), x + t0 * in, in, w, in, T(0), y + t0 * out, out);
        if (b)
          for (int64_t t = t0; t < t1; ++t)
            for (int o = 0; o < out; ++o) y[t * out + o] += b[o];
      },
      kRowGrain);
}

template <class T>
void linear_backward(const T* x, const T* w, const T* dy, int64_t n, int in, int out, T* dx, bool accumulate_dx, T* dw,
                     T* db, ThreadPool& pool) {
  if (dx) {
    pool.parallel_for_fn(
        n,
        [&](int64_t t0, int64_t t1) {
          gemm<T>(false, false, t1 - t0, in, out, T(1), dy + t0 * out, out, w, in, accumulate_dx ? T(1) : T(0),
                  dx + t0 * in, in);
        },
        kRowGrain);
  }
  // dW[o0:o1] += dy[:, o0:o1]^T x: threads split the output rows of W.
  pool.parallel_for_fn(
      out,
      [&](int64_t o0, int64_t o1) {
        gemm<T>(true, false, o1 - o0, in, n, T(1), dy + o0, out, x, in, T(1), dw + o0 * in, in);
        if (db)
          for (int64_t t = 0; t < n; ++t)
            for (int64_t o = o0; o < o1; ++o) db[o] += dy[t * out + o];
      },
      kRowGrain);
}

template void linear_forward<float>(const float*, const float*, const float*, int64_t, int, int, float*, ThreadPool&);
template void linear_forward<double>(const double*, const double*, const double*, int64_t, int, int, double*,
                                     ThreadPool&);
template void linear_backward<float>(const float*, const float*, const float*, int64_t, int, int, float*, bool, float*,
                                     float*, ThreadPool&);
template void linear_backward<double>(const double*, const double*, const double*, int64_t, int, int, double*, bool,
                                      double*, double*, ThreadPool&);

}  // namespace kvslim::train
