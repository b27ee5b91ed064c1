// Rotary position embedding (llama's adjacent-pair convention, as src/tensor/ops.cpp computes
// it for inference: angles in double, then rounded to the scalar type).
#include <cmath>

#include "train/grad_ops.h"
#include "util/error.h"

namespace kvslim::train {

template <class T>
RopeTable<T>::RopeTable(int head_dim, double base, int64_t max_positions)
    : head_dim(head_dim), max_positions(max_positions) {
  if (head_dim <= 0 || head_dim % 2 != 0) fail("rope: head size {} must be even and positive", head_dim);
  const int half = head_dim / 2;
  cos.resize(size_t(max_positions) * half);
  sin.resize(size_t(max_positions) * half);
  for (int64_t p = 0; p < max_positions; ++p)
    for (int i = 0; i < half; ++i) {
      const double theta = double(p) * std::pow(base, -2.0 * i / head_dim);
      cos[size_t(p) * half + i] = T(std::cos(theta));
      sin[size_t(p) * half + i] = T(std::sin(theta));
    }
}

namespace {

// Rotates every head of every row by +theta (sign = 1) or -theta (sign = -1).
template <class T>
void rotate(T* x, int64_t n, int n_heads, const int32_t* positions, const RopeTable<T>& table, T sign) {
  const int hd = table.head_dim, half = hd / 2;
  for (int64_t t = 0; t < n; ++t) {
    if (positions[t] < 0 || positions[t] >= table.max_positions)
      fail("rope: position {} outside the table [0, {})", positions[t], table.max_positions);
    const T* cs = table.cos.data() + int64_t(positions[t]) * half;
    const T* sn = table.sin.data() + int64_t(positions[t]) * half;
    for (int h = 0; h < n_heads; ++h) {
      T* v = x + (t * n_heads + h) * hd;
      for (int i = 0; i < half; ++i) {
        const T a = v[2 * i], b = v[2 * i + 1], s = sign * sn[i];
        v[2 * i] = a * cs[i] - b * s;
        v[2 * i + 1] = a * s + b * cs[i];
      }
    }
  }
}

}  // namespace

template <class T>
void rope_forward(T* x, int64_t n, int n_heads, const int32_t* positions, const RopeTable<T>& table) {
  rotate(x, n, n_heads, positions, table, T(1));
}

template <class T>
void rope_backward(T* dx, int64_t n, int n_heads, const int32_t* positions, const RopeTable<T>& table) {
  rotate(dx, n, n_heads, positions, table, T(-1));
}

template struct RopeTable<float>;
template struct RopeTable<double>;
template void rope_forward<float>(float*, int64_t, int, const int32_t*, const RopeTable<float>&);
template void rope_forward<double>(double*, int64_t, int, const int32_t*, const RopeTable<double>&);
template void rope_backward<float>(float*, int64_t, int, const int32_t*, const RopeTable<float>&);
template void rope_backward<double>(double*, int64_t, int, const int32_t*, const RopeTable<double>&);

}  // namespace kvslim::train
