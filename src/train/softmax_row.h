// A softmax over one row that also returns the row's log-sum-exp, shared by attention and
// cross-entropy. float rows go through the inference kernel (vectorised exp), so the trainer's
// attention probabilities are the engine's.
#pragma once

#include <cmath>
#include <cstdint>

#include "tensor/ops.h"

namespace kvslim::train {

// x = softmax(x); returns log(sum(exp(x_original))). n >= 1, entries finite.
inline double softmax_row(float* x, int64_t n) {
  int64_t arg = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[arg]) arg = i;
  const double top = x[arg];
  softmax_inplace(x, n);
  // The largest entry becomes exp(0) / sum, so log(sum) = -log(its probability).
  return top - std::log(double(x[arg]));
}

inline double softmax_row(double* x, int64_t n) {
  double top = x[0];
  for (int64_t i = 1; i < n; ++i) top = std::max(top, x[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += (x[i] = std::exp(x[i] - top));
  for (int64_t i = 0; i < n; ++i) x[i] /= sum;
  return top + std::log(sum);
}

}  // namespace kvslim::train
