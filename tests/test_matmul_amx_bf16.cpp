// The AMX-BF16 GEMM for F16 and BF16 weights (src/tensor/matmul_bf16_amx.cpp): x and w are split
// into exact bf16 terms, so results must be as close to the exact products as an f32 GEMM's.
// Runs at the avx512bf16 level where the CPU has AMX-BF16 and the kernel grants it; skipped
// elsewhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/isa.h"
#include "tensor/matmul_internal.h"
#include "tensor/ops.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace kvslim {
namespace {

bool amx_bf16_level_usable() {
  for (Isa isa : supported_isas()) {
    if (isa != Isa::Avx512Bf16) continue;
    const ScopedIsa scoped(isa);
    return detail::amx_bf16_usable();
  }
  return false;
}

// A weight matrix stored as f16 or bf16, with its exact values as doubles.
struct Weights16 {
  DType type;
  int64_t rows, cols;
  std::vector<uint16_t> bits;
  std::vector<double> exact;
  WeightView view() const { return WeightView{type, bits.data(), rows, cols}; }
};

Weights16 make_weights(DType type, int64_t rows, int64_t cols, const std::vector<float>& values) {
  Weights16 w{type, rows, cols, std::vector<uint16_t>(values.size()), std::vector<double>(values.size())};
  for (size_t i = 0; i < values.size(); ++i) {
    w.bits[i] = type == DType::F16 ? fp32_to_fp16(values[i]) : fp32_to_bf16(values[i]);
    w.exact[i] = type == DType::F16 ? fp16_to_fp32(w.bits[i]) : bf16_to_fp32(w.bits[i]);
  }
  return w;
}

// y = x W^T at the avx512bf16 level (through matmul, which takes AMX from 16 tokens on), checked
// against the exact sums: |y - exact| <= tol * sum |w x|, the bound an f32 GEMM meets.
void expect_exact_to_f32(const Weights16& w, const std::vector<float>& x, int64_t n, double tol,
                         const std::string& what) {
  const ScopedIsa scoped(Isa::Avx512Bf16);
  ThreadPool pool(2);
  std::vector<float> y(static_cast<size_t>(n * w.rows), -1.0f);
  matmul(w.view(), x.data(), n, y.data(), pool);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t r = 0; r < w.rows; ++r) {
      double want = 0.0, mag = 0.0;
      for (int64_t c = 0; c < w.cols; ++c) {
        const double p = w.exact[size_t(r * w.cols + c)] * x[size_t(t * w.cols + c)];
        want += p;
        mag += std::fabs(p);
      }
      const double got = y[size_t(t * w.rows + r)];
      ASSERT_LE(std::fabs(got - want), tol * mag + 1e-30)
          << what << ": token " << t << " row " << r << " got " << got << " want " << want;
    }
  }
}

TEST(AmxBf16Gemm, RandomShapesMatchTheExactSums) {
  if (!amx_bf16_level_usable()) GTEST_SKIP() << "no usable AMX-BF16 at the avx512bf16 level";
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // 200 rows: two 128-row groups, the second with an odd number of 16-row panels and a partial
  // one; 300 columns: slices of 64 with a last chunk of 12; 16, 37 and 70 tokens: one whole token
  // panel, then odd panel counts with partial panels.
  for (DType type : {DType::F16, DType::BF16}) {
    std::vector<float> wv(200 * 300);
    for (float& v : wv) v = normal(rng);
    const Weights16 w = make_weights(type, 200, 300, wv);
    for (int64_t n : {int64_t{16}, int64_t{37}, int64_t{70}}) {
      std::vector<float> x(size_t(n * 300));
      for (float& v : x) v = normal(rng) * 3.0f;
      expect_exact_to_f32(w, x, n, 2e-6, std::string(dtype_name(type)) + " n=" + std::to_string(n));
    }
  }
}

// Every term is needed: x = 2^e (1 + 2^-9 + 2^-18) needs all three of its bf16 terms, and the f16
// weight 2^e (1 + 2^-9) both of its own. With all products positive their errors cannot cancel:
// leaving out x's third term is off by 2^-18 of the sum (3.8e-6), w's second by 2^-9.
TEST(AmxBf16Gemm, EveryTermOfTheSplitCounts) {
  if (!amx_bf16_level_usable()) GTEST_SKIP() << "no usable AMX-BF16 at the avx512bf16 level";
  const int64_t rows = 20, cols = 96, n = 18;
  std::vector<float> wv(rows * cols), x(n * cols);
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = std::ldexp(1.0f + 0x1p-9f, int(i % 5) - 2);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(1.0f + 0x1p-9f + 0x1p-18f, int(i % 7) - 3);
  expect_exact_to_f32(make_weights(DType::F16, rows, cols, wv), x, n, 1e-6, "f16");
  expect_exact_to_f32(make_weights(DType::BF16, rows, cols, wv), x, n, 1e-6, "bf16");
}

// Attention's products take f32 on both sides: w = 2^e (1 + 2^-9 + 2^-18) needs three terms as x
// does, and leaving out w3 x1 is off by 2^-18 of the sum. nt reads W as rows, nn as columns.
TEST(AmxBf16Gemm, AttentionProductsKeepEveryTermOfF32) {
  if (!amx_bf16_level_usable()) GTEST_SKIP() << "no usable AMX-BF16 at the avx512bf16 level";
  const ScopedIsa scoped(Isa::Avx512Bf16);
  const int64_t rows = 20, k = 96, n = 18;
  std::vector<float> w(rows * k), x(n * k);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::ldexp(1.0f + 0x1p-9f + 0x1p-18f, int(i % 5) - 2);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(1.0f + 0x1p-9f + 0x1p-18f, int(i % 7) - 3);
  for (bool transposed : {false, true}) {
    std::vector<float> y(size_t(n * rows));
    if (transposed) {
      gemm_f32_nn(x.data(), k, n, w.data(), k, rows, y.data(), rows, false);
    } else {
      gemm_f32_nt(x.data(), k, n, w.data(), rows, k, y.data(), rows, false);
    }
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        double want = 0.0;
        for (int64_t c = 0; c < k; ++c) {
          const double wv = transposed ? w[size_t(c * rows + r)] : w[size_t(r * k + c)];
          want += wv * double(x[size_t(t * k + c)]);
        }
        ASSERT_LE(std::fabs(y[size_t(t * rows + r)] - want), 1e-6 * want)
            << (transposed ? "nn" : "nt") << " token " << t << " row " << r;
      }
    }
  }
}

TEST(AmxBf16Gemm, SameBitsOnOneThreadAndTwo) {
  if (!amx_bf16_level_usable()) GTEST_SKIP() << "no usable AMX-BF16 at the avx512bf16 level";
  const ScopedIsa scoped(Isa::Avx512Bf16);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t rows = 384, cols = 256, n = 48;
  std::vector<float> wv(rows * cols), x(n * cols);
  for (float& v : wv) v = normal(rng);
  for (float& v : x) v = normal(rng);
  const Weights16 w = make_weights(DType::F16, rows, cols, wv);
  std::vector<float> y1(size_t(n * rows)), y2(size_t(n * rows));
  ThreadPool one(1), two(2);
  matmul(w.view(), x.data(), n, y1.data(), one);
  matmul(w.view(), x.data(), n, y2.data(), two);
  EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)), 0);
}

TEST(AmxBf16Gemm, RefusesOtherWeightTypes) {
  if (!amx_bf16_level_usable()) GTEST_SKIP() << "no usable AMX-BF16 at the avx512bf16 level";
  const ScopedIsa scoped(Isa::Avx512Bf16);
  ThreadPool pool(1);
  std::vector<float> w(32 * 32, 1.0f), x(16 * 32, 1.0f), y(16 * 32);
  EXPECT_THROW(detail::matmul_bf16_amx(WeightView{DType::F32, w.data(), 32, 32}, x.data(), 16, y.data(), pool), Error);
}

}  // namespace
}  // namespace kvslim
