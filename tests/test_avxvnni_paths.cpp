// The avxvnni level's code paths, run on any AVX2 CPU: CMake builds the level's kernel files once
// more as kvslim::isa_avxvnni_check, with vpdpbusd emulated exactly by AVX2 instructions
// (isa_begin.h, simd.h's dpbusd256), and links that copy into this test binary only. Everything
// else in that copy is the avxvnni level's code, so these tests check its unpacking, layouts and
// corrections: its int32 sums are the AVX2 level's exactly and its f32 steps the same, so decode
// (the VNNI dot-product path) and prefill (the int8 GEMM) must give the AVX2 level's bits. The
// instruction itself only runs on a CPU with AVX-VNNI, where the every-level tests run the real
// level against the scalar one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "random_values.h"
#include "tensor/dtype.h"
#include "tensor/isa.h"
#include "tensor/tensor_isa.h"
#include "util/thread_pool.h"

#if defined(__x86_64__)
namespace kvslim {
namespace {

// rows x cols weights of `type` from Gaussian values with a few large ones (the blocks' extremes).
std::vector<uint8_t> weights(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  auto v = test::normal_vec(static_cast<size_t>(rows * cols), seed, 0.05f);
  for (size_t i = 0; i < v.size(); i += 97) v[i] *= 40.0f;
  std::vector<uint8_t> data(row_bytes(type, cols) * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    convert_from_f32(v.data() + r * cols, type, data.data() + row_bytes(type, cols) * r, cols);
  return data;
}

std::vector<float> activations(int64_t n, uint32_t seed) {
  auto x = test::normal_vec(static_cast<size_t>(n), seed);
  for (size_t i = 0; i < x.size(); i += 61) x[i] *= 30.0f;  // outliers, as real activations have
  return x;
}

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void require_avx2() {
  if (!cpu_supports(Isa::Avx2)) GTEST_SKIP() << "the emulated avxvnni code needs AVX2";
}

class AvxVnniDecode : public ::testing::TestWithParam<DType> {};
class AvxVnniPrefill : public ::testing::TestWithParam<DType> {};

TEST_P(AvxVnniDecode, GivesTheAvx2LevelsBits) {
  require_avx2();
  const DType type = GetParam();
  const int64_t rows = 37, cols = 768;
  auto data = weights(type, rows, cols, 3);
  const WeightView w{type, data.data(), rows, cols};
  const auto x = activations(cols, 4);
  ThreadPool pool(2);
  std::vector<float> want(rows, -1.0f), got(rows, -2.0f);
  float* want_out = want.data();
  float* got_out = got.data();
  const QuantKernel avx2_path = type == DType::Q8_0 ? QuantKernel::Auto : QuantKernel::Avx2;
  const QuantKernel vnni_path = type == DType::Q8_0 ? QuantKernel::Auto : QuantKernel::Vnni;
  isa_avx2::matvec_multi({&w, 1}, x.data(), {&want_out, 1}, pool, avx2_path);
  isa_avxvnni_check::matvec_multi({&w, 1}, x.data(), {&got_out, 1}, pool, vnni_path);
  EXPECT_TRUE(bits_equal(got, want)) << dtype_name(type) << ": row 0 " << got[0] << " vs " << want[0];
  // The scalar level as a sanity check of the scale (the AVX2 level is checked against it elsewhere).
  std::vector<float> scalar(rows);
  float* scalar_out = scalar.data();
  isa_scalar::matvec_multi({&w, 1}, x.data(), {&scalar_out, 1}, pool, QuantKernel::Scalar);
  for (int64_t r = 0; r < rows; ++r) EXPECT_NEAR(got[r], scalar[r], 1e-3 * (1.0 + std::fabs(scalar[r]))) << r;
}

TEST_P(AvxVnniPrefill, GivesTheAvx2LevelsBits) {
  require_avx2();
  const DType type = GetParam();
  // Shapes off the tiles (4 tokens x 8 or 16 rows, 16-block K slices) in every direction.
  for (const auto& [n, rows, cols] :
       {std::tuple<int64_t, int64_t, int64_t>{9, 37, 512}, {1, 16, 256}, {33, 70, 1280}}) {
    auto data = weights(type, rows, cols, 5);
    const WeightView w{type, data.data(), rows, cols};
    const auto x = activations(n * cols, 6);
    ThreadPool pool(2);
    std::vector<float> want(static_cast<size_t>(n * rows), -1.0f), got(want.size(), -2.0f);
    isa_avx2::detail::matmul_q8(w, x.data(), n, want.data(), pool);
    isa_avxvnni_check::detail::matmul_q8(w, x.data(), n, got.data(), pool);
    EXPECT_TRUE(bits_equal(got, want)) << dtype_name(type) << " " << n << "x" << rows << "x" << cols << ": " << got[0]
                                       << " vs " << want[0];
  }
}

TEST(AvxVnniPaths, TheCopyNamesTheAvxVnniKernels) {
  require_avx2();
  EXPECT_STREQ(isa_avxvnni_check::matvec_kernel(DType::Q4_K), "avx-vnni int8 dot");
  EXPECT_STREQ(isa_avxvnni_check::matvec_kernel(DType::Q8_0), "avx-vnni int8 dot");
  EXPECT_EQ(std::string(isa_avxvnni_check::matmul_kernel(DType::Q4_0)).rfind("avx-vnni int8 gemm", 0), 0u)
      << isa_avxvnni_check::matmul_kernel(DType::Q4_0);
}

auto type_name = [](const auto& info) { return std::string(dtype_name(info.param)); };
INSTANTIATE_TEST_SUITE_P(BlockTypes, AvxVnniDecode,
                         ::testing::Values(DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K,
                                           DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL,
                                           DType::IQ4_XS, DType::MXFP4),
                         type_name);
// The types with an int8 GEMM (the others' prefill is the f32 GEMM, which has no VNNI code).
INSTANTIATE_TEST_SUITE_P(BlockTypes, AvxVnniPrefill,
                         ::testing::Values(DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q4_K,
                                           DType::Q5_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4),
                         type_name);

}  // namespace
}  // namespace kvslim
#endif
