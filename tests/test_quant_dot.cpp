// matvec / matmul of the block types q4_0 .. q6_k against a double-precision reference written
// here: weights dequantised, activations rounded the way the format's dot products quantise
// them (q8_0-style blocks of 32 for the legacy types, q8_K super-blocks for K-quants), products
// summed in double. Every code path of the active level (AVX-512 VNNI, AVX2, NEON, scalar) is
// forced in turn and the others must be refused; odd row counts; one and two threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

constexpr DType kBlockTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,   DType::Q2_K,   DType::Q3_K,
                                 DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4};

bool is_k(DType t) { return dtype_block_size(t) == 256; }

// The dot-product paths each instruction-set level has (tensor/quant_dot_simd.cpp), best first:
// these must run, every other path must be refused.
std::vector<QuantKernel> paths_at(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return {QuantKernel::Scalar};
    case Isa::Avx2:
    case Isa::Avx512F: return {QuantKernel::Avx2, QuantKernel::Scalar};
    case Isa::AvxVnni:
    case Isa::Avx512:
    case Isa::Avx512Bf16: return {QuantKernel::Vnni, QuantKernel::Avx2, QuantKernel::Scalar};
    case Isa::Neon:
    case Isa::NeonDot:
    case Isa::NeonI8mm: return {QuantKernel::Neon, QuantKernel::Scalar};
  }
  ADD_FAILURE() << "no dot-product paths listed for the level " << isa_name(isa);
  return {};
}

const char* path_name(QuantKernel path) {
  switch (path) {
    case QuantKernel::Auto: return "auto";
    case QuantKernel::Vnni: return "vnni";
    case QuantKernel::Avx2: return "avx2";
    case QuantKernel::Scalar: return "scalar";
    case QuantKernel::Neon: return "neon";
  }
  return "?";
}

// Activations as the kernels see them, computed independently of the library: q8_K super-blocks
// for K-quants (q8k = true), q8_0-style blocks of 32 otherwise.
std::vector<double> rounded_activations(DType t, const std::vector<float>& x, bool q8k) {
  std::vector<double> out(x.size());
  const size_t block = q8k ? 256 : 32;
  for (size_t b = 0; b < x.size(); b += block) {
    float amax = 0, max = 0;
    for (size_t i = 0; i < block; ++i) {
      if (std::fabs(x[b + i]) > amax) {
        amax = std::fabs(x[b + i]);
        max = x[b + i];
      }
    }
    for (size_t i = 0; i < block; ++i) {
      if (amax == 0) {
        out[b + i] = 0;
      } else if (q8k) {  // q8_K: the signed maximum maps to -127, d = 1 / iscale
        const float iscale = -127.0f / max;
        out[b + i] = double(1 / iscale) * std::min(127.0f, std::nearbyint(iscale * x[b + i]));
      } else {  // q8_0-style: d = amax / 127
        out[b + i] = double(amax / 127.0f) * std::nearbyint(x[b + i] * (127.0f / amax));
      }
    }
  }
  return out;
}

struct Matrix {
  std::vector<uint8_t> bytes;
  std::vector<double> dequant;  // rows x cols
  WeightView view;
};

Matrix random_matrix(DType t, int64_t rows, int64_t cols, uint64_t seed) {
  Matrix m;
  m.bytes.resize(row_bytes(t, cols) * rows);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<float> row(cols), back(cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) row[c] = nd(rng) + (r % 5 == 0 ? 0.03f : 0.0f);  // some offset rows
    uint8_t* dst = m.bytes.data() + r * row_bytes(t, cols);
    convert_from_f32(row.data(), t, dst, cols);
    convert_to_f32(t, dst, back.data(), cols);
    m.dequant.insert(m.dequant.end(), back.begin(), back.end());
  }
  m.view = WeightView{t, m.bytes.data(), rows, cols};
  return m;
}

std::vector<float> random_x(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng);
  x[3] = 6.0f;  // an outlier, as real activations have
  return x;
}

// Expected y and, per row, sum |w * x| (the scale of f32 rounding error).
void reference(const Matrix& m, const std::vector<double>& xr, std::vector<double>& y, std::vector<double>& mag) {
  const int64_t rows = m.view.rows, cols = m.view.cols;
  y.assign(rows, 0.0);
  mag.assign(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      y[r] += m.dequant[r * cols + c] * xr[c];
      mag[r] += std::fabs(m.dequant[r * cols + c] * xr[c]);
    }
  }
}

class QuantDot : public ::testing::TestWithParam<DType> {};

TEST_P(QuantDot, EveryPathMatchesDoubleReferenceOnOddRowCounts) {
  const DType t = GetParam();
  // 7 legacy blocks: one whole group of 4 for q4_0's AVX-512 kernel, then 3 blocks after it.
  const int64_t cols = is_k(t) ? 768 : 224;
  const int64_t rows = 37;
  const Matrix m = random_matrix(t, rows, cols, 11);
  const auto x = random_x(cols, 5);
  std::vector<double> want, mag;
  reference(m, rounded_activations(t, x, is_k(t)), want, mag);
  ThreadPool one(1), two(2);
  const std::vector<QuantKernel> available = paths_at(active_isa());
  ASSERT_FALSE(available.empty());
  ASSERT_EQ(available.back(), QuantKernel::Scalar);  // every level has the scalar path
  for (QuantKernel path : {QuantKernel::Vnni, QuantKernel::Avx2, QuantKernel::Neon, QuantKernel::Scalar}) {
    SCOPED_TRACE(std::string(dtype_name(t)) + " on the " + path_name(path) + " path at the " + isa_name(active_isa()) +
                 " level");
    std::vector<float> y(rows, -1.0f);
    if (std::find(available.begin(), available.end(), path) == available.end()) {
      EXPECT_THROW(matvec(m.view, x.data(), y.data(), one, path), Error);
      continue;
    }
    matvec(m.view, x.data(), y.data(), one, path);
    std::vector<float> y2(rows);
    matvec(m.view, x.data(), y2.data(), two, path);
    for (int64_t r = 0; r < rows; ++r) {
      // Integer sums are exact; only the f32 scaling and accumulation round (a few ulp of the
      // magnitude), plus a rare one-step activation rounding flip next to a .5 boundary.
      EXPECT_NEAR(y[r], want[r], 2e-5 * mag[r] + 1e-6) << "row " << r;
      EXPECT_EQ(y[r], y2[r]) << "thread count changed row " << r;
    }
  }
}

TEST_P(QuantDot, MatmulMatchesReferenceForEachToken) {
  const DType t = GetParam();
  const int64_t cols = is_k(t) ? 512 : 64, rows = 45, n = 7;
  const Matrix m = random_matrix(t, rows, cols, 17);
  std::vector<float> xs;
  for (int i = 0; i < n; ++i) {
    const auto x = random_x(cols, 100 + i);
    xs.insert(xs.end(), x.begin(), x.end());
  }
  ThreadPool pool(2);
  std::vector<float> y(n * rows);
  matmul(m.view, xs.data(), n, y.data(), pool);
  for (int i = 0; i < n; ++i) {
    const std::vector<float> x(xs.begin() + i * cols, xs.begin() + (i + 1) * cols);
    std::vector<double> want, mag;
    // Prefill's int8 GEMM (every level but scalar) takes the K-quants and iq4_xs with q8_0-style
    // activations of 32; at the scalar level they go through the f32 GEMM with x rounded through
    // q8_K as decode does.
    const bool int8_gemm_k = detail::matmul_q8_takes(t);
    reference(m, rounded_activations(t, x, is_k(t) && !int8_gemm_k), want, mag);
    for (int64_t r = 0; r < rows; ++r) EXPECT_NEAR(y[i * rows + r], want[r], 2e-5 * mag[r] + 1e-6) << i << " " << r;
  }
}

TEST(QuantDot, AutoPathIsTheBestAvailable) {
  const Matrix m = random_matrix(DType::Q4_K, 3, 256, 1);
  const auto x = random_x(256, 2);
  ThreadPool pool(1);
  std::vector<float> a(3), b(3);
  matvec(m.view, x.data(), a.data(), pool);
  const std::vector<QuantKernel> available = paths_at(active_isa());
  ASSERT_FALSE(available.empty());
  matvec(m.view, x.data(), b.data(), pool, available.front());
  EXPECT_EQ(a, b) << "auto is not the " << path_name(available.front()) << " path";
}

TEST(QuantDot, RowLengthThatIsNotWholeBlocksIsRefused) {
  std::vector<uint8_t> bytes(4096);
  const WeightView w{DType::Q6_K, bytes.data(), 2, 128};
  std::vector<float> x(128), y(2);
  ThreadPool pool(1);
  EXPECT_THROW(matvec(w, x.data(), y.data(), pool), Error);
  EXPECT_THROW(matmul(w, x.data(), 1, y.data(), pool), Error);
}

INSTANTIATE_TEST_SUITE_P(AllBlockTypes, QuantDot, ::testing::ValuesIn(kBlockTypes),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

}  // namespace
}  // namespace kvslim
