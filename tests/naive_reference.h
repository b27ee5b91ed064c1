// Building blocks of the tests' naive reference forwards (test_qwen3moe.cpp, test_gptoss_forward.cpp):
// double copies of a GGUF's f32 tensors, plain-loop products and RMSNorm. Nothing of the engine's.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "forward_checks.h"
#include "gguf/gguf.h"

namespace kvslim::testing {

// An f32 tensor of the file, as doubles.
inline Vec tensor(const gguf::File& f, const std::string& name) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t) throw std::runtime_error("reference: no tensor " + name);
  EXPECT_EQ(t->type, uint32_t(gguf::TensorType::F32)) << name;
  const float* p = reinterpret_cast<const float*>(f.tensor_data(*t));
  return Vec(p, p + t->n_elements);
}

// y = W x with W's rows starting at `w` (rows x x.size()).
inline Vec matvec(const double* w, size_t rows, const Vec& x) {
  Vec y(rows, 0.0);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < x.size(); ++c) y[r] += w[r * x.size() + c] * x[c];
  return y;
}
inline Vec matvec(const Vec& w, const Vec& x) { return matvec(w.data(), w.size() / x.size(), x); }

inline Vec rmsnorm(const Vec& x, const double* w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / double(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
  return y;
}

}  // namespace kvslim::testing
