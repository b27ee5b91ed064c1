// Every instruction-set level this CPU runs against the scalar level, for the kernels that have
// hand-written SIMD versions (NEON on aarch64; AVX2 / AVX-512 on x86): matvec of f32 / f16 /
// bf16 / q8_0 rows, every block type's integer dot products (also on random bit patterns), the
// f32 GEMM (matmul and gemm_f32_nt), dot, rmsnorm and the f16 / bf16 conversions, and the kernel
// names info --system reports. Results may differ from the scalar level's only by f32 rounding
// (a different summation order), bounded by a small multiple of f32's epsilon times sum |w * x|.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kv/attention.h"
#include "tensor/dtype.h"
#include "tensor/isa.h"
#include "tensor/ops.h"
#include "util/thread_pool.h"
#include "random_values.h"

namespace kvslim {
namespace {

using test::normal_vec;

struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<float> deq;  // rows x cols, dequantised
  WeightView view;
};

Weights make_weights(DType t, int64_t rows, int64_t cols, uint64_t seed) {
  Weights w;
  const auto src = normal_vec(static_cast<size_t>(rows * cols), seed, 0.05f);
  const size_t rb = row_bytes(t, cols);
  w.bytes.resize(rb * static_cast<size_t>(rows));
  w.deq.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    convert_from_f32(src.data() + r * cols, t, w.bytes.data() + r * rb, cols);
    convert_to_f32(t, w.bytes.data() + r * rb, w.deq.data() + r * cols, cols);
  }
  w.view = WeightView{t, w.bytes.data(), rows, cols};
  return w;
}

// sum |w * x| of each row: the scale of the rounding error of one dot product.
std::vector<double> magnitudes(const Weights& w, const float* x) {
  std::vector<double> mag(static_cast<size_t>(w.view.rows));
  for (int64_t r = 0; r < w.view.rows; ++r) {
    for (int64_t c = 0; c < w.view.cols; ++c) mag[r] += std::fabs(double(w.deq[r * w.view.cols + c]) * x[c]);
  }
  return mag;
}

// matvec of `t` at every supported level, the block types on every path the level has, against
// the scalar level's.
void check_matvec(DType t, int64_t rows, int64_t cols) {
  const Weights w = make_weights(t, rows, cols, 7 + static_cast<uint64_t>(t));
  auto x = normal_vec(static_cast<size_t>(cols), 3);
  x[1] = 5.0f;
  const auto mag = magnitudes(w, x.data());
  ThreadPool pool(1);
  std::vector<float> want(static_cast<size_t>(rows));
  {
    ScopedIsa scalar(Isa::Scalar);
    matvec(w.view, x.data(), want.data(), pool);
  }
  for (Isa isa : supported_isas()) {
    ScopedIsa level(isa);
    std::vector<float> y(static_cast<size_t>(rows), -1.0f);
    matvec(w.view, x.data(), y.data(), pool);
    // AVX512-BF16 multiplies bf16 weights with x rounded to bf16 (2^-9 relative).
    // Block types: a level's activation quantisation may round one value next to a .5 boundary
    // the other way (one step of d_x).
    const double rel = t == DType::BF16 && bf16_weights_round_x() ? 1e-2 : dtype_is_quantized(t) ? 3e-5 : 1e-5;
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_NEAR(y[r], want[r], rel * mag[r] + 1e-7)
          << dtype_name(t) << " " << cols << " columns, row " << r << " at " << isa_name(isa);
    }
  }
}

TEST(IsaKernels, MatvecFloatTypesMatchScalarLevel) {
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    for (int64_t cols : {1, 3, 4, 15, 16, 17, 31, 32, 33, 64, 100, 256, 1000}) check_matvec(t, 9, cols);
  }
}

TEST(IsaKernels, MatvecQ8_0MatchesScalarLevel) {
  for (int64_t cols : {32, 64, 96, 128, 160, 512, 544, 1024}) check_matvec(DType::Q8_0, 11, cols);
}

TEST(IsaKernels, MatvecBlockTypesMatchScalarLevel) {
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::MXFP4}) {
    for (int64_t cols : {32, 64, 96, 224, 512}) check_matvec(t, 13, cols);
  }
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS}) {
    for (int64_t cols : {256, 512, 768}) check_matvec(t, 13, cols);
  }
}

constexpr DType kBlockTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,   DType::Q2_K,   DType::Q3_K,
                                 DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4};

// Every block type: the level's own dot-product path (Auto: NEON on aarch64, AVX2 / VNNI on
// x86) against the scalar arithmetic of the same level.
TEST(IsaKernels, BlockTypesAutoPathMatchesScalarPathAtEveryLevel) {
  for (DType t : kBlockTypes) {
    const Weights w = make_weights(t, 5, 512, 21);
    const auto x = normal_vec(512, 22);
    const auto mag = magnitudes(w, x.data());
    ThreadPool pool(1);
    for (Isa isa : supported_isas()) {
      ScopedIsa level(isa);
      std::vector<float> a(5), b(5);
      matvec(w.view, x.data(), a.data(), pool, QuantKernel::Auto);
      matvec(w.view, x.data(), b.data(), pool, QuantKernel::Scalar);
      for (int r = 0; r < 5; ++r)
        ASSERT_NEAR(a[r], b[r], 1e-5 * mag[r] + 1e-7) << dtype_name(t) << " " << isa_name(isa);
    }
  }
}

// Byte offsets in one block of `t` of its f16 scale fields (d, and dmin / m where the format
// has one).
std::vector<size_t> f16_fields(DType t) {
  switch (t) {
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K: return {0, 2};
    case DType::Q2_K: return {80, 82};
    case DType::Q3_K: return {108};
    case DType::Q6_K: return {208};
    case DType::MXFP4: return {};  // no f16 field: its E8M0 byte is set by e8m0_field_value
    default: return {0};           // q4_0, q5_0, iq4_nl, iq4_xs
  }
}

// An mxfp4 block's E8M0 byte (offset 0) for the random-bits test: scales 2^-8 .. 2^-4, not any
// power of two up to 2^127 (which would overflow f32 in the products).
uint8_t e8m0_field_value(std::mt19937& rng) { return static_cast<uint8_t>(120 + rng() % 5); }

// Random bit patterns for every level, scale and high-bit field (so each 2-, 3-, 4-, 5- and 6-bit
// level, every sub-block scale and min, and each hmask / qh bit occurs in every position),
// with valid f16 scales: the level's dot-product path gives the scalar path's result (the
// integers are the same; only the f32 summation order differs).
TEST(IsaKernels, BlockTypesOnRandomBitsMatchScalarPathAtEveryLevel) {
  std::mt19937 rng(99);
  for (DType t : kBlockTypes) {
    const int64_t rows = 9, cols = dtype_block_size(t) == 256 ? 768 : 224;
    const size_t rb = row_bytes(t, cols), bb = dtype_block_bytes(t);
    std::vector<uint8_t> bytes(rb * rows);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    for (size_t off = 0; off < bytes.size(); off += bb) {
      for (size_t f : f16_fields(t)) {
        const uint16_t h = fp32_to_fp16(0.001f + static_cast<float>(rng() % 1000) * 1e-5f);
        std::memcpy(&bytes[off + f], &h, 2);
      }
      if (t == DType::MXFP4) bytes[off] = e8m0_field_value(rng);
    }
    // Row 0 every bit set, row 1 none (past the scale fields): the extremes of every field.
    for (size_t off = 0; off < rb; off += bb) {
      std::vector<uint8_t> keep(bytes.begin() + off, bytes.begin() + off + bb);
      std::memset(&bytes[off], 0xFF, bb);
      std::memset(&bytes[rb + off], 0x00, bb);
      for (size_t f : f16_fields(t)) {
        std::memcpy(&bytes[off + f], &keep[f], 2);
        std::memcpy(&bytes[rb + off + f], &keep[f], 2);
      }
      if (t == DType::MXFP4) bytes[off] = bytes[rb + off] = keep[0];
    }
    const WeightView w{t, bytes.data(), rows, cols};
    std::vector<float> deq(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) convert_to_f32(t, bytes.data() + r * rb, deq.data() + r * cols, cols);
    auto x = normal_vec(static_cast<size_t>(cols), 23);
    x[7] = -9.0f;
    std::vector<double> mag(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) mag[r] += std::fabs(double(deq[r * cols + c]) * x[c]);
    }
    ThreadPool pool(1);
    for (Isa isa : supported_isas()) {
      ScopedIsa level(isa);
      std::vector<float> a(rows), b(rows);
      matvec(w, x.data(), a.data(), pool, QuantKernel::Auto);
      matvec(w, x.data(), b.data(), pool, QuantKernel::Scalar);
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_NEAR(a[r], b[r], 1e-5 * mag[r] + 1e-7) << dtype_name(t) << " row " << r << " at " << isa_name(isa);
      }
    }
  }
}

// The kernel names that info --system reports: every block type has a vector dot product at
// every level above scalar, and the types of the int8 GEMM take it wherever the level has one.
TEST(IsaKernels, KernelNamesNameTheVectorPaths) {
  for (Isa isa : supported_isas()) {
    if (isa == Isa::Scalar) continue;
    ScopedIsa level(isa);
    for (DType t : kBlockTypes) {
      const std::string decode = matvec_kernel(t);
      EXPECT_EQ(decode.find("scalar"), std::string::npos) << dtype_name(t) << " at " << isa_name(isa) << ": " << decode;
    }
    for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_K}) {
      const std::string prefill = matmul_kernel(t);
      const bool int8 = prefill.find("int8 gemm") != std::string::npos;
      EXPECT_TRUE(int8 || isa == Isa::Neon) << dtype_name(t) << " at " << isa_name(isa) << ": " << prefill;
    }
    // Decode attention runs the level's vector loops, not per-head calls of dot() and axpy().
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
      const std::string attention = attention_kernel(t, 64);
      EXPECT_EQ(attention.find("then dot / axpy"), std::string::npos)
          << dtype_name(t) << " at " << isa_name(isa) << ": " << attention;
    }
  }
}

// The f32 GEMM (prefill) of matmul for the float types and gemm_f32_nt, with token and row
// counts that leave partial micro-tiles of every size the levels use, K past one K slice.
TEST(IsaKernels, GemmMatchesScalarLevel) {
  // (Every block type takes an int8 GEMM at every level but scalar: test_matmul_int8.cpp checks
  // those across levels.)
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    for (int64_t n : {2, 5, 9, 17}) {
      const int64_t rows = 37, cols = 300;
      const Weights w = make_weights(t, rows, cols, 31 + n);
      const auto x = normal_vec(static_cast<size_t>(n * cols), 41 + n);
      ThreadPool pool(2);
      std::vector<float> want(static_cast<size_t>(n * rows));
      {
        ScopedIsa scalar(Isa::Scalar);
        matmul(w.view, x.data(), n, want.data(), pool);
      }
      for (Isa isa : supported_isas()) {
        ScopedIsa level(isa);
        std::vector<float> y(static_cast<size_t>(n * rows), -1.0f);
        matmul(w.view, x.data(), n, y.data(), pool);
        for (int64_t i = 0; i < n; ++i) {
          const auto mag = magnitudes(w, x.data() + i * cols);
          for (int64_t r = 0; r < rows; ++r) {
            // AVX512-BF16 multiplies bf16 weights with x rounded to bf16 (2^-9 relative).
            const double rel = t == DType::BF16 && bf16_weights_round_x() ? 1e-2 : 1e-5;
            const double tol = rel * mag[r] + 1e-6;
            ASSERT_NEAR(y[i * rows + r], want[i * rows + r], tol)
                << dtype_name(t) << " n=" << n << " token " << i << " row " << r << " at " << isa_name(isa);
          }
        }
      }
    }
  }
}

TEST(IsaKernels, GemmF32NtAccumulatesLikeScalarLevel) {
  const int64_t n = 11, rows = 29, k = 70, ldx = 75, ldy = 33;
  const auto x = normal_vec(static_cast<size_t>(n * ldx), 51);
  const auto w = normal_vec(static_cast<size_t>(rows * k), 52);
  const auto y0 = normal_vec(static_cast<size_t>(n * ldy), 53);
  std::vector<float> want = y0;
  {
    ScopedIsa scalar(Isa::Scalar);
    gemm_f32_nt(x.data(), ldx, n, w.data(), rows, k, want.data(), ldy, true);
  }
  for (Isa isa : supported_isas()) {
    ScopedIsa level(isa);
    std::vector<float> y = y0;
    gemm_f32_nt(x.data(), ldx, n, w.data(), rows, k, y.data(), ldy, true);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < ldy; ++j) {
        double mag = std::fabs(y0[i * ldy + j]);
        if (j < rows) {
          for (int64_t c = 0; c < k; ++c) mag += std::fabs(double(x[i * ldx + c]) * w[j * k + c]);
        }
        ASSERT_NEAR(y[i * ldy + j], want[i * ldy + j], 1e-5 * mag + 1e-7) << i << " " << j << " at " << isa_name(isa);
      }
    }
  }
}

TEST(IsaKernels, DotAndRmsnormMatchScalarLevel) {
  for (int64_t n : {1, 5, 16, 37, 64, 100, 2048}) {
    const auto a = normal_vec(static_cast<size_t>(n), 61 + n), b = normal_vec(static_cast<size_t>(n), 62 + n);
    const auto w = normal_vec(static_cast<size_t>(n), 63 + n);
    double mag = 0;
    for (int64_t i = 0; i < n; ++i) mag += std::fabs(double(a[i]) * b[i]);
    float want_dot;
    std::vector<float> want_norm(static_cast<size_t>(n));
    {
      ScopedIsa scalar(Isa::Scalar);
      want_dot = dot(a.data(), b.data(), n);
      rmsnorm(a.data(), w.data(), want_norm.data(), n, 1e-5f);
    }
    for (Isa isa : supported_isas()) {
      ScopedIsa level(isa);
      EXPECT_NEAR(dot(a.data(), b.data(), n), want_dot, 1e-5 * mag + 1e-7) << n << " at " << isa_name(isa);
      std::vector<float> y(static_cast<size_t>(n));
      rmsnorm(a.data(), w.data(), y.data(), n, 1e-5f);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_NEAR(y[i], want_norm[i], 1e-5 * std::fabs(want_norm[i]) + 1e-7)
            << n << " " << i << " at " << isa_name(isa);
      }
    }
  }
}

// The bulk f16 / bf16 conversions give the scalar level's bits at every level.
TEST(IsaKernels, HalfConversionsMatchScalarLevelBitForBit) {
  auto x = normal_vec(1003, 71, 100.0f);
  x[0] = 65520.0f;
  x[1] = 1e-7f;
  x[2] = -0.0f;
  for (DType t : {DType::F16, DType::BF16}) {
    std::vector<uint16_t> want(x.size()), got(x.size());
    std::vector<float> want_back(x.size()), got_back(x.size());
    {
      ScopedIsa scalar(Isa::Scalar);
      convert_from_f32(x.data(), t, want.data(), static_cast<int64_t>(x.size()));
      convert_to_f32(t, want.data(), want_back.data(), static_cast<int64_t>(x.size()));
    }
    for (Isa isa : supported_isas()) {
      ScopedIsa level(isa);
      convert_from_f32(x.data(), t, got.data(), static_cast<int64_t>(x.size()));
      convert_to_f32(t, want.data(), got_back.data(), static_cast<int64_t>(x.size()));
      EXPECT_EQ(got, want) << dtype_name(t) << " at " << isa_name(isa);
      EXPECT_EQ(got_back, want_back) << dtype_name(t) << " at " << isa_name(isa);
    }
  }
}

TEST(IsaKernels, EveryCompiledLevelOfThisArchitectureIsNamed) {
  const auto levels = supported_isas();
  ASSERT_FALSE(levels.empty());
  EXPECT_EQ(levels.front(), Isa::Scalar);
  std::string names;
  for (Isa isa : levels) names += std::string(isa_name(isa)) + " ";
  std::printf("supported levels: %s\n", names.c_str());
}

}  // namespace
}  // namespace kvslim
