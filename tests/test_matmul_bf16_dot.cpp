// The vdpbf16ps GEMM for BF16 weights (Bf16Panels in src/tensor/matmul.cpp, detail::matmul_bf16_dot):
// x is rounded to bf16 (nearest even), as decode rounds it, and every product of two bf16 values
// is exact in f32, so results must be the sums over x rounded by hand, up to f32 summation.
// matmul takes this GEMM on AMD CPUs only (detail::bf16_dot_gemm_preferred); these tests call it
// directly, so that it is checked on every CPU with AVX512-BF16, and skip elsewhere.
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

bool cpu_has_bf16_level() {
  for (Isa isa : supported_isas())
    if (isa == Isa::Avx512Bf16) return true;
  return false;
}

// f rounded to 8 significant bits, ties to even, written out from the definition of bf16 (no
// bit tricks shared with the library's conversion).
double rounded_to_bf16(float f) {
  if (f == 0.0f) return 0.0;
  int e;
  std::frexp(f, &e);  // |f| in [2^(e-1), 2^e)
  const double step = std::ldexp(1.0, e - 8);
  return std::nearbyint(double(f) / step) * step;  // nearbyint rounds ties to even
}

struct Bf16Weights {
  int64_t rows, cols;
  std::vector<uint16_t> bits;
  std::vector<double> exact;
  WeightView view() const { return WeightView{DType::BF16, bits.data(), rows, cols}; }
};

Bf16Weights make_weights(int64_t rows, int64_t cols, const std::vector<float>& values) {
  Bf16Weights w{rows, cols, std::vector<uint16_t>(values.size()), std::vector<double>(values.size())};
  for (size_t i = 0; i < values.size(); ++i) {
    w.bits[i] = fp32_to_bf16(values[i]);
    w.exact[i] = bf16_to_fp32(w.bits[i]);
  }
  return w;
}

std::vector<float> run(const Bf16Weights& w, const std::vector<float>& x, int64_t n, int threads) {
  const ScopedIsa scoped(Isa::Avx512Bf16);
  ThreadPool pool(threads);
  std::vector<float> y(size_t(n * w.rows), -1.0f);
  detail::matmul_bf16_dot(w.view(), x.data(), n, y.data(), pool);
  return y;
}

// |y - sum w * round(x)| <= tol * sum |w * round(x)| for every output.
void expect_rounded_x_sums(const Bf16Weights& w, const std::vector<float>& x, int64_t n, double tol,
                           const std::string& what) {
  const auto y = run(w, x, n, 2);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t r = 0; r < w.rows; ++r) {
      double want = 0.0, mag = 0.0;
      for (int64_t c = 0; c < w.cols; ++c) {
        const double p = w.exact[size_t(r * w.cols + c)] * rounded_to_bf16(x[size_t(t * w.cols + c)]);
        want += p;
        mag += std::fabs(p);
      }
      const double got = y[size_t(t * w.rows + r)];
      ASSERT_LE(std::fabs(got - want), tol * mag + 1e-30)
          << what << ": token " << t << " row " << r << " got " << got << " want " << want;
    }
  }
}

TEST(Bf16DotGemm, RandomShapesMatchTheSumsOverRoundedX) {
  if (!cpu_has_bf16_level()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // 70 rows: two 32-row panels and a partial one; 301 columns: a 256-deep K slice, then 45
  // (an odd count: the last pair is half padding); 2, 15 and 37 tokens: one partial token
  // panel, then whole and partial 14-token panels.
  const int64_t rows = 70, cols = 301;
  std::vector<float> wv(size_t(rows * cols));
  for (float& v : wv) v = normal(rng);
  const Bf16Weights w = make_weights(rows, cols, wv);
  for (int64_t n : {int64_t{2}, int64_t{15}, int64_t{37}}) {
    std::vector<float> x(size_t(n * cols));
    for (float& v : x) v = normal(rng) * 3.0f;
    expect_rounded_x_sums(w, x, n, 1e-5, "n=" + std::to_string(n));
  }
}

// x is rounded to nearest, ties to even, before multiplying: with w = 1, 1 + 2^-8 (a tie) must
// count as 1 and 1 + 3 x 2^-8 (a tie) as 1 + 2^-6. Kept exact, truncated or rounded ties-up, the
// sums would be off by 2^-8 or 2^-7 of themselves, far beyond f32 rounding.
TEST(Bf16DotGemm, RoundsXToNearestEven) {
  if (!cpu_has_bf16_level()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  const int64_t rows = 3, cols = 64, n = 4;
  const Bf16Weights w = make_weights(rows, cols, std::vector<float>(size_t(rows * cols), 1.0f));
  std::vector<float> x(size_t(n * cols));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = 0; c < cols; ++c) x[size_t(t * cols + c)] = t % 2 == 0 ? 1.0f + 0x1p-8f : 1.0f + 3 * 0x1p-8f;
  const auto y = run(w, x, n, 1);
  for (int64_t t = 0; t < n; ++t) {
    const double each = t % 2 == 0 ? 1.0 : 1.0 + 0x1p-6;
    for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(y[size_t(t * rows + r)], each * cols) << "token " << t;
  }
  expect_rounded_x_sums(w, x, n, 1e-6, "ties");
}

TEST(Bf16DotGemm, SameBitsOnOneThreadAndTwo) {
  if (!cpu_has_bf16_level()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t rows = 320, cols = 512, n = 30;
  std::vector<float> wv(size_t(rows * cols)), x(size_t(n * cols));
  for (float& v : wv) v = normal(rng);
  for (float& v : x) v = normal(rng);
  const Bf16Weights w = make_weights(rows, cols, wv);
  const auto y1 = run(w, x, n, 1), y2 = run(w, x, n, 2);
  EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)), 0);
}

TEST(Bf16DotGemm, RefusesOtherWeightTypes) {
  if (!cpu_has_bf16_level()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  const ScopedIsa scoped(Isa::Avx512Bf16);
  ThreadPool pool(1);
  std::vector<uint16_t> w(32 * 32, 0x3c00);  // f16 ones
  std::vector<float> x(4 * 32, 1.0f), y(4 * 32);
  EXPECT_THROW(detail::matmul_bf16_dot(WeightView{DType::F16, w.data(), 32, 32}, x.data(), 4, y.data(), pool), Error);
}

// Below avx512bf16 there is no such GEMM: asking for it is an error, not an illegal instruction.
TEST(Bf16DotGemm, RefusedBelowTheBf16Level) {
  const ScopedIsa scoped(Isa::Scalar);
  ThreadPool pool(1);
  std::vector<uint16_t> w(32 * 32, 0x3f80);  // bf16 ones
  std::vector<float> x(4 * 32, 1.0f), y(4 * 32);
  EXPECT_THROW(detail::matmul_bf16_dot(WeightView{DType::BF16, w.data(), 32, 32}, x.data(), 4, y.data(), pool), Error);
}

}  // namespace
}  // namespace kvslim
