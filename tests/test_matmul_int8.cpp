// The two int8 prefill GEMMs (AVX-512 VNNI and AMX-INT8 tiles) on shapes that are not whole
// tiles, against a double reference with the activations quantised as the kernels do, and
// against each other bit for bit (their int32 sums are exact and their f32 steps the same).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/matmul_internal.h"
#include "tensor/ops.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace kvslim {
namespace {

std::vector<float> normal_vec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// x rounded through the kernels' activation quantisation (blocks of 32, d = amax / 127,
// q = round(x / d)), computed independently in scalar code.
std::vector<double> quantised_x(const float* x, int64_t cols) {
  std::vector<double> out(static_cast<size_t>(cols));
  for (int64_t b = 0; b < cols / 32; ++b) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    for (int j = 0; j < 32; ++j) out[b * 32 + j] = static_cast<double>(d) * std::nearbyint(x[b * 32 + j] * id);
  }
  return out;
}

struct Shape {
  int64_t n, rows, cols;
};

class Int8Gemm : public ::testing::TestWithParam<DType> {};

TEST_P(Int8Gemm, BothPathsMatchReferenceAndEachOtherOnOddShapes) {
  if (!detail::matmul_q8_available()) GTEST_SKIP() << "no AVX-512 VNNI int8 GEMM in this build";
  const DType type = GetParam();
  const bool k_quant = type == DType::Q4_K || type == DType::Q5_K;
  // M (tokens), N (rows) and K (blocks) around the tile sizes (16 / 32 tokens, 16 / 32 rows,
  // 128-row weight groups, 16-block K slices): 1 short of, 1 past, and far from whole tiles.
  std::vector<Shape> shapes;
  if (k_quant) {
    shapes = {{2, 1, 256}, {17, 33, 256}, {33, 47, 768}, {31, 15, 512}, {48, 65, 1280}, {19, 131, 256}};
  } else {
    shapes = {{2, 3, 32},   {17, 33, 64},  {15, 31, 96},   {33, 47, 288},
              {50, 1, 32},  {31, 65, 544}, {40, 40, 1056}, {21, 150, 96}};
  }
  const bool amx = detail::amx_int8_usable();
  ThreadPool pool(2);
  uint32_t seed = 1;
  for (const Shape& s : shapes) {
    const size_t rb = row_bytes(type, s.cols);
    const auto src = normal_vec(static_cast<size_t>(s.rows * s.cols), seed++);
    std::vector<uint8_t> data(rb * s.rows);
    std::vector<float> deq(src.size());
    for (int64_t r = 0; r < s.rows; ++r) {
      convert_from_f32(src.data() + r * s.cols, type, data.data() + rb * r, s.cols);
      convert_to_f32(type, data.data() + rb * r, deq.data() + r * s.cols, s.cols);
    }
    const WeightView w{type, data.data(), s.rows, s.cols};
    auto x = normal_vec(static_cast<size_t>(s.n * s.cols), seed++);
    std::fill_n(x.begin() + 32, 32, 0.0f);  // an all-zero activation block (d = 0)
    x[5] = 40.0f;                           // and one dominated by a single large value

    std::vector<float> y_vnni(static_cast<size_t>(s.n * s.rows), -1.0f), y_amx(y_vnni.size(), -2.0f);
    detail::matmul_q8(w, x.data(), s.n, y_vnni.data(), pool, detail::Int8Gemm::Vnni);
    if (amx) detail::matmul_q8(w, x.data(), s.n, y_amx.data(), pool, detail::Int8Gemm::Amx);

    for (int64_t t = 0; t < s.n; ++t) {
      const auto xq = quantised_x(x.data() + t * s.cols, s.cols);
      for (int64_t r = 0; r < s.rows; ++r) {
        const float* wr = deq.data() + r * s.cols;
        double want = 0.0, mag = 0.0;
        for (int64_t b = 0; b < s.cols / 32; ++b) {
          // Kernels apply a block's min separately from its levels; |min| <= the block's max |w|.
          double wmax = 0.0;
          for (int j = 0; j < 32; ++j) wmax = std::max(wmax, std::fabs(double(wr[b * 32 + j])));
          for (int j = 0; j < 32; ++j) {
            const int64_t c = b * 32 + j;
            want += double(wr[c]) * xq[c];
            mag += (std::fabs(double(wr[c])) + wmax) * std::fabs(xq[c]);
          }
        }
        const size_t i = static_cast<size_t>(t * s.rows + r);
        // Integer sums are exact; only f32 scaling and accumulation round.
        ASSERT_NEAR(y_vnni[i], want, 2e-5 * mag + 1e-6)
            << dtype_name(type) << " " << s.n << "x" << s.rows << "x" << s.cols << " t=" << t << " r=" << r;
        if (amx) {
          ASSERT_EQ(0, std::memcmp(&y_amx[i], &y_vnni[i], 4))
              << "AMX differs from VNNI: " << dtype_name(type) << " " << s.n << "x" << s.rows << "x" << s.cols
              << " t=" << t << " r=" << r << ": " << y_amx[i] << " vs " << y_vnni[i];
        }
      }
    }
  }
  if (!amx) GTEST_SKIP() << "AMX-INT8 not usable here: only the VNNI path was checked";
}

INSTANTIATE_TEST_SUITE_P(BlockTypes, Int8Gemm,
                         ::testing::Values(DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                                           DType::Q4_K, DType::Q5_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Int8GemmPaths, AmxThreadCountDoesNotChangeResults) {
  if (!detail::amx_int8_usable()) GTEST_SKIP() << "AMX-INT8 not usable here";
  const int64_t n = 45, rows = 133, cols = 1024;
  const auto src = normal_vec(static_cast<size_t>(rows * cols), 3);
  const size_t rb = row_bytes(DType::Q8_0, cols);
  std::vector<uint8_t> data(rb * rows);
  for (int64_t r = 0; r < rows; ++r) convert_from_f32(src.data() + r * cols, DType::Q8_0, data.data() + rb * r, cols);
  const WeightView w{DType::Q8_0, data.data(), rows, cols};
  const auto x = normal_vec(static_cast<size_t>(n * cols), 4);
  ThreadPool one(1), three(3);
  std::vector<float> y1(static_cast<size_t>(n * rows)), y3(y1.size());
  detail::matmul_q8(w, x.data(), n, y1.data(), one, detail::Int8Gemm::Amx);
  detail::matmul_q8(w, x.data(), n, y3.data(), three, detail::Int8Gemm::Amx);
  EXPECT_EQ(0, std::memcmp(y1.data(), y3.data(), y1.size() * 4));
}

TEST(Int8GemmPaths, AmxRequestedWhereUnusableIsRefused) {
  if (!detail::matmul_q8_available() || detail::amx_int8_usable()) GTEST_SKIP() << "AMX usable (or no int8 GEMM)";
  std::vector<uint8_t> data(row_bytes(DType::Q8_0, 32));
  float x[64] = {}, y[2];
  ThreadPool pool(1);
  EXPECT_THROW(detail::matmul_q8(WeightView{DType::Q8_0, data.data(), 1, 32}, x, 2, y, pool, detail::Int8Gemm::Amx),
               Error);
}

}  // namespace
}  // namespace kvslim
