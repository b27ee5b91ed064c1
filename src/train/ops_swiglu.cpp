// SwiGLU: h = silu(gate) * up, silu(g) = g * sigmoid(g).
#include <cmath>

#include "tensor/ops.h"
#include "train/grad_ops.h"

namespace kvslim::train {

template <>
void swiglu_forward<float>(const float* gate, const float* up, int64_t n, float* h) {
  kvslim::swiglu(gate, up, h, n);  // the inference kernel, so trainer and engine agree
}

template <>
void swiglu_forward<double>(const double* gate, const double* up, int64_t n, double* h) {
  for (int64_t i = 0; i < n; ++i) h[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
}

// d silu(g)/dg = s + g s (1 - s) with s = sigmoid(g).
template <class T>
void swiglu_backward(const T* gate, const T* up, const T* dh, int64_t n, T* d_gate, T* d_up) {
  for (int64_t i = 0; i < n; ++i) {
    const T g = gate[i];
    const T s = T(1) / (T(1) + std::exp(-g));
    d_up[i] = dh[i] * g * s;
    d_gate[i] = dh[i] * up[i] * s * (T(1) + g * (T(1) - s));
  }
}

template void swiglu_backward<float>(const float*, const float*, const float*, int64_t, float*, float*);
template void swiglu_backward<double>(const double*, const double*, const double*, int64_t, double*, double*);

}  // namespace kvslim::train
