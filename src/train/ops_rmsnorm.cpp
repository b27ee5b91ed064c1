// RMSNorm: y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps).
#include <cmath>

#include "train/grad_ops.h"

namespace kvslim::train {

template <class T>
void rmsnorm_forward(const T* x, const T* w, int64_t n, int dim, T eps, T* y, T* rstd, ThreadPool& pool) {
  pool.parallel_for_fn(n, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const T* xt = x + t * dim;
      double ss = 0;
      for (int i = 0; i < dim; ++i) ss += double(xt[i]) * xt[i];
      const T r = T(1.0 / std::sqrt(ss / dim + double(eps)));
      rstd[t] = r;
      T* yt = y + t * dim;
      for (int i = 0; i < dim; ++i) yt[i] = xt[i] * r * w[i];
    }
  });
}

// With g = w * dy: dx = rstd * (g - x * rstd^2 * mean(g * x)), since d(rstd)/dx = -rstd^3 x / dim.
template <class T>
void rmsnorm_backward(const T* x, const T* w, const T* rstd, const T* dy, int64_t n, int dim, T* dx, T* dw,
                      ThreadPool& pool) {
  pool.parallel_for_fn(n, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const T* xt = x + t * dim;
      const T* dyt = dy + t * dim;
      T gx = 0;
      for (int i = 0; i < dim; ++i) gx += w[i] * dyt[i] * xt[i];
      const T r = rstd[t];
      const T c = r * r * gx / T(dim);
      T* dxt = dx + t * dim;
      for (int i = 0; i < dim; ++i) dxt[i] += r * (w[i] * dyt[i] - xt[i] * c);
    }
  });
  // dw sums over tokens; threads split the columns so each sum keeps one order.
  pool.parallel_for_fn(
      dim,
      [&](int64_t i0, int64_t i1) {
        for (int64_t t = 0; t < n; ++t) {
          const T* xt = x + t * dim;
          const T* dyt = dy + t * dim;
          const T r = rstd[t];
          for (int64_t i = i0; i < i1; ++i) dw[i] += dyt[i] * xt[i] * r;
        }
      },
      16);
}

template void rmsnorm_forward<float>(const float*, const float*, int64_t, int, float, float*, float*, ThreadPool&);
template void rmsnorm_forward<double>(const double*, const double*, int64_t, int, double, double*, double*,
                                      ThreadPool&);
template void rmsnorm_backward<float>(const float*, const float*, const float*, const float*, int64_t, int, float*,
                                      float*, ThreadPool&);
template void rmsnorm_backward<double>(const double*, const double*, const double*, const double*, int64_t, int,
                                       double*, double*, ThreadPool&);

}  // namespace kvslim::train
