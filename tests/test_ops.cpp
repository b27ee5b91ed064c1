// Tests of the tensor kernels against naive double-precision references.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/kernels.h"
#include "tensor/matmul_internal.h"
#include "tensor/ops.h"
#include "util/error.h"
#include "util/thread_pool.h"
#include "random_values.h"

namespace kvslim {
namespace {

using test::normal_vec;

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

constexpr DType kAllTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0};

// Weights of a given type made from random floats, plus their exact dequantised values.
struct TestWeights {
  DType type;
  int64_t rows, cols;
  std::vector<uint8_t> data;
  std::vector<float> deq;  // rows x cols
  WeightView view() const { return WeightView{type, data.data(), rows, cols}; }
};

TestWeights make_weights(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  TestWeights w{type, rows, cols, {}, {}};
  const auto src = normal_vec(static_cast<size_t>(rows * cols), seed);
  const size_t rb = row_bytes(type, cols);
  w.data.resize(rb * static_cast<size_t>(rows));
  w.deq.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    convert_from_f32(src.data() + r * cols, type, w.data.data() + rb * r, cols);
    convert_to_f32(type, w.data.data() + rb * r, w.deq.data() + r * cols, cols);
  }
  return w;
}

// The error budget of one output y = sum_c w_c x_c computed by a kernel.
//  - f32/f16/bf16: float accumulation; |err| <= 1e-5 * sum |w_c x_c| + 1e-6 (far above the
//    actual error of the blocked sums, far below any real bug).
//  - q8_0: x is quantised per 32-block with d = amax/127 and q = round(x/d), so each x_c moves
//    by at most d_b/2; |err| <= sum_c |w_c| d_b(c) / 2 (+ the float term above).
struct Expected {
  double value;
  double tolerance;
};

Expected reference_dot(DType type, const float* w, const float* x, int64_t cols) {
  double s = 0.0, abs_sum = 0.0, quant = 0.0;
  for (int64_t c = 0; c < cols; ++c) {
    s += static_cast<double>(w[c]) * x[c];
    abs_sum += std::fabs(static_cast<double>(w[c]) * x[c]);
  }
  if (type == DType::Q8_0) {
    for (int64_t b = 0; b < cols / 32; ++b) {
      double amax = 0.0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(static_cast<double>(x[b * 32 + j])));
      const double d = amax / 127.0;
      for (int j = 0; j < 32; ++j) quant += std::fabs(static_cast<double>(w[b * 32 + j])) * d / 2.0;
    }
  }
  // bf16 weights on AVX512-BF16 builds meet x rounded to bf16: each x_c moves by at most 2^-8
  // of itself.
  if (type == DType::BF16 && bf16_weights_round_x()) quant = abs_sum * std::ldexp(1.0, -8);
  return {s, 1e-5 * abs_sum + 1e-6 + quant * (1.0 + 1e-5)};
}

// x as the kernels for `type` see it before multiplying `tokens` rows of x: rounded to bf16 (the
// scalar round-to-nearest-even, tested on hand-picked values above) where bf16_weights_round_x()
// says decode does so, and for several tokens where the level prefers the bf16 GEMM and AMX
// does not take the product; else (the f32 GEMM, AMX's exact terms) unchanged. Against it only
// float rounding remains.
std::vector<float> x_as_kernels_see_it(DType type, const float* x, int64_t n, int64_t tokens) {
  std::vector<float> out(x, x + n);
  const bool rounds = tokens == 1 ? bf16_weights_round_x()
                                  : detail::bf16_dot_gemm_preferred() && !(tokens >= 16 && detail::amx_bf16_usable());
  if (type == DType::BF16 && rounds)
    for (float& v : out) v = bf16_to_fp32(fp32_to_bf16(v));
  return out;
}

// The exact result the q8_0 kernels should produce up to float rounding: x quantised the same
// way, in double.
double reference_dot_quantised_x(const float* w, const float* x, int64_t cols) {
  double s = 0.0;
  for (int64_t b = 0; b < cols / 32; ++b) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    for (int j = 0; j < 32; ++j) {
      const float q = std::nearbyint(x[b * 32 + j] * id);
      s += static_cast<double>(w[b * 32 + j]) * static_cast<double>(d) * q;
    }
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// dtype tables

TEST(OpsDType, GgmlIdsAndNames) {
  for (DType t : kAllTypes) {
    EXPECT_EQ(dtype_from_ggml(ggml_type_id(t)), t);
    EXPECT_EQ(dtype_from_name(dtype_name(t)), t);
  }
  EXPECT_EQ(ggml_type_id(DType::F32), 0u);
  EXPECT_EQ(ggml_type_id(DType::F16), 1u);
  EXPECT_EQ(ggml_type_id(DType::Q8_0), 8u);
  EXPECT_EQ(ggml_type_id(DType::BF16), 30u);
  EXPECT_STREQ(dtype_name(DType::Q8_0), "q8_0");
  EXPECT_STREQ(dtype_name(DType::BF16), "bf16");
  try {
    dtype_from_ggml(16);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("iq2_xxs"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dtype_from_ggml(1000), Error);
  EXPECT_THROW(dtype_from_name("q8_1"), Error);
  EXPECT_THROW(dtype_from_name(""), Error);
}

TEST(OpsDType, RowBytes) {
  EXPECT_EQ(row_bytes(DType::F32, 10), 40u);
  EXPECT_EQ(row_bytes(DType::F16, 10), 20u);
  EXPECT_EQ(row_bytes(DType::BF16, 2048), 4096u);
  EXPECT_EQ(row_bytes(DType::Q8_0, 64), 68u);
  EXPECT_EQ(row_bytes(DType::Q8_0, 2048), 2176u);
  EXPECT_THROW(row_bytes(DType::Q8_0, 33), Error);
}

// ---------------------------------------------------------------------------------------------
// fp16 / bf16

TEST(OpsFp16, HandPickedValues) {
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65519.99f), 0x7bff);                 // below the halfway point to 65536
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);                  // ties to even: overflows to inf
  EXPECT_EQ(fp32_to_fp16(6.103515625e-05f), 0x0400);          // smallest normal 2^-14
  EXPECT_EQ(fp32_to_fp16(6.0975551605224609e-05f), 0x03ff);   // largest subnormal
  EXPECT_EQ(fp32_to_fp16(5.9604644775390625e-08f), 0x0001);   // smallest subnormal 2^-24
  EXPECT_EQ(fp32_to_fp16(2.98023223876953125e-08f), 0x0000);  // 2^-25: tie -> even (0)
  EXPECT_EQ(fp32_to_fp16(2.98023259e-08f), 0x0001);           // just above the tie
  EXPECT_EQ(fp32_to_fp16(8.94069671630859375e-08f), 0x0002);  // 1.5 * 2^-24: tie -> even (2)
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(0.0f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);
  const uint16_t nan = fp32_to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_EQ(fp32_to_fp16(1.0f / 3.0f), 0x3555);     // 0.333251953125
  EXPECT_EQ(fp32_to_fp16(1.00048828125f), 0x3c00);  // 1 + 2^-11: tie -> even (1.0)
  EXPECT_EQ(fp32_to_fp16(1.00146484375f), 0x3c02);  // 1 + 3*2^-11: tie -> even (1 + 2^-9)
  EXPECT_EQ(fp32_to_fp16(1e-10f), 0x0000);

  EXPECT_EQ(fp16_to_fp32(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_fp32(0x0400), 6.103515625e-05f);
  EXPECT_EQ(fp16_to_fp32(0x03ff), 6.0975551605224609e-05f);
  EXPECT_EQ(fp16_to_fp32(0x0001), 5.9604644775390625e-08f);
  EXPECT_EQ(bits_of(fp16_to_fp32(0x8000)), 0x80000000u);
  EXPECT_EQ(fp16_to_fp32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp16_to_fp32(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7e00)));
  EXPECT_EQ(fp16_to_fp32(0x3555), 0.333251953125f);
}

TEST(OpsFp16, ExhaustiveRoundTrip) {
  std::vector<uint16_t> all;
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto hv = static_cast<uint16_t>(h);
    const float f = fp16_to_fp32(hv);
    EXPECT_EQ(bits_of(f), bits_of(detail::fp16_to_fp32_portable(hv))) << std::hex << h;
    if ((h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << h;
      continue;
    }
    all.push_back(hv);
    ASSERT_EQ(fp32_to_fp16(f), hv) << std::hex << h;
    ASSERT_EQ(detail::fp32_to_fp16_portable(f), hv) << std::hex << h;
  }
  // The bulk converters agree with the scalar ones.
  std::vector<float> f(all.size());
  convert_to_f32(DType::F16, all.data(), f.data(), static_cast<int64_t>(all.size()));
  std::vector<uint16_t> back(all.size());
  convert_from_f32(f.data(), DType::F16, back.data(), static_cast<int64_t>(f.size()));
  EXPECT_EQ(back, all);
}

TEST(OpsFp16, PortableMatchesHardwareOnRandomFloats) {
  // Random bit patterns plus values just around fp16 rounding boundaries.
  std::mt19937 rng(42);
  std::vector<float> values;
  for (int i = 0; i < 400000; ++i) values.push_back(float_of(rng()));
  for (uint32_t h = 0; h < 0x7c00; h += 7) {
    const uint32_t b = bits_of(detail::fp16_to_fp32_portable(static_cast<uint16_t>(h)));
    for (int d = -2; d <= 2; ++d) values.push_back(float_of(b + 0x1000 + d));  // around the midpoint
  }
  std::vector<uint16_t> bulk(values.size());
  convert_from_f32(values.data(), DType::F16, bulk.data(), static_cast<int64_t>(values.size()));
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t p = detail::fp32_to_fp16_portable(values[i]);
    ASSERT_EQ(fp32_to_fp16(values[i]), p) << std::hex << bits_of(values[i]);
    ASSERT_EQ(bulk[i], p) << std::hex << bits_of(values[i]);
  }
}

TEST(OpsBf16, HandPickedValues) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(fp32_to_bf16(1.0f / 3.0f), 0x3eab);            // 0x3eaaaaab rounds up
  EXPECT_EQ(fp32_to_bf16(float_of(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(fp32_to_bf16(float_of(0x3f818000u)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(fp32_to_bf16(float_of(0x3f808001u)), 0x3f81);
  EXPECT_EQ(fp32_to_bf16(65504.0f), 0x4780);
  EXPECT_EQ(fp32_to_bf16(float_of(0x00010000u)), 0x0001);  // subnormal stays exact
  EXPECT_EQ(fp32_to_bf16(float_of(0x00018000u)), 0x0002);  // subnormal tie -> even
  EXPECT_EQ(fp32_to_bf16(float_of(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds to inf
  EXPECT_EQ(fp32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(fp32_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  const uint16_t nan = fp32_to_bf16(float_of(0x7f800001u));  // signalling nan stays a nan
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
  EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_fp32(0x3eab), float_of(0x3eab0000u));
  EXPECT_TRUE(std::isnan(bf16_to_fp32(0x7fc0)));
  EXPECT_EQ(bits_of(bf16_to_fp32(0x8000)), 0x80000000u);
}

TEST(OpsBf16, BulkMatchesScalar) {
  std::mt19937 rng(7);
  std::vector<float> values;
  for (int i = 0; i < 100003; ++i) values.push_back(float_of(rng()));
  for (uint32_t b : {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0x00000001u, 0x80008000u, 0x3f808000u}) {
    values.push_back(float_of(b));
  }
  std::vector<uint16_t> bulk(values.size());
  convert_from_f32(values.data(), DType::BF16, bulk.data(), static_cast<int64_t>(values.size()));
  std::vector<float> back(values.size());
  convert_to_f32(DType::BF16, bulk.data(), back.data(), static_cast<int64_t>(bulk.size()));
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(bulk[i], fp32_to_bf16(values[i])) << std::hex << bits_of(values[i]);
    ASSERT_EQ(bits_of(back[i]), bits_of(bf16_to_fp32(bulk[i])));
  }
  // Exhaustive bf16 -> f32 -> bf16 round trip (nan excluded).
  for (uint32_t h = 0; h < 65536; ++h) {
    if ((h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0) continue;
    ASSERT_EQ(fp32_to_bf16(bf16_to_fp32(static_cast<uint16_t>(h))), h);
  }
}

// ---------------------------------------------------------------------------------------------
// q8_0

TEST(OpsQ8, HandComputedBlocks) {
  // Block 0: amax 127 -> d = 1, q = roundf(x) (half away from zero).
  // Block 1: all zero -> d = 0, q = 0.
  // Block 2: amax 254 -> d = 2, q = roundf(x / 2).
  float x[96] = {};
  const float b0[] = {127.0f, -127.0f, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 0.49f, 126.6f, -3.2f};
  const int8_t q0[] = {127, -127, 1, -1, 2, 3, -3, 0, 127, -3};
  std::copy(std::begin(b0), std::end(b0), x);
  const float b2[] = {254.0f, 3.0f, 5.0f, -5.0f, 1.0f, 0.9f, -254.0f};
  const int8_t q2[] = {127, 2, 3, -3, 1, 0, -127};
  std::copy(std::begin(b2), std::end(b2), x + 64);
  BlockQ8_0 blocks[3];
  convert_from_f32(x, DType::Q8_0, blocks, 96);
  EXPECT_EQ(blocks[0].scale_f16, 0x3c00);  // 1.0
  EXPECT_EQ(blocks[1].scale_f16, 0x0000);
  EXPECT_EQ(blocks[2].scale_f16, 0x4000);  // 2.0
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(blocks[0].q[j], j < 10 ? q0[j] : 0) << j;
    EXPECT_EQ(blocks[1].q[j], 0) << j;
    EXPECT_EQ(blocks[2].q[j], j < 7 ? q2[j] : 0) << j;
  }
  float back[96];
  convert_to_f32(DType::Q8_0, blocks, back, 96);
  EXPECT_EQ(back[0], 127.0f);
  EXPECT_EQ(back[5], 3.0f);
  EXPECT_EQ(back[64 + 2], 6.0f);
  EXPECT_EQ(back[64 + 6], -254.0f);
  EXPECT_THROW(convert_from_f32(x, DType::Q8_0, blocks, 40), Error);
}

TEST(OpsQ8, MatchesGgmlReferenceOnRandomData) {
  const int64_t n = 32 * 257;
  auto x = normal_vec(static_cast<size_t>(n), 99, 3.0f);
  x[5] = 0.0f;
  for (int j = 0; j < 32; ++j) x[64 + j] = 0.0f;  // an all-zero block
  std::vector<BlockQ8_0> got(static_cast<size_t>(n / 32));
  convert_from_f32(x.data(), DType::Q8_0, got.data(), n);
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    ASSERT_EQ(got[b].scale_f16, fp32_to_fp16(d)) << b;
    for (int j = 0; j < 32; ++j) {
      ASSERT_EQ(got[b].q[j], static_cast<int8_t>(std::roundf(x[b * 32 + j] * id))) << b << " " << j;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// matvec

class OpsMatvec : public ::testing::TestWithParam<DType> {};

TEST_P(OpsMatvec, MatchesDoubleReference) {
  const DType type = GetParam();
  ThreadPool pool(2);
  uint32_t seed = 1;
  std::vector<int64_t> col_sizes = {32, 64, 96, 2080};
  if (type != DType::Q8_0) col_sizes.insert(col_sizes.end(), {1, 7, 17, 33, 100, 257});  // ragged tails
  for (int64_t cols : col_sizes) {
    for (int64_t rows : {1, 3, 17, 64, 301}) {
      const TestWeights w = make_weights(type, rows, cols, seed++);
      const auto x = normal_vec(static_cast<size_t>(cols), seed++);
      std::vector<float> y(static_cast<size_t>(rows), -1.0f);
      matvec(w.view(), x.data(), y.data(), pool);
      for (int64_t r = 0; r < rows; ++r) {
        const float* wr = w.deq.data() + r * cols;
        const Expected e = reference_dot(type, wr, x.data(), cols);
        ASSERT_NEAR(y[r], e.value, e.tolerance) << dtype_name(type) << " " << rows << "x" << cols << " row " << r;
        if (type == DType::Q8_0) {
          // Against x quantised the same way, only float rounding remains.
          ASSERT_NEAR(y[r], reference_dot_quantised_x(wr, x.data(), cols),
                      1e-5 * std::sqrt(double(cols)) + 1e-4 * std::fabs(e.value))
              << rows << "x" << cols << " row " << r;
        } else {
          const auto xs = x_as_kernels_see_it(type, x.data(), cols, 1);
          const Expected exact = reference_dot(DType::F32, wr, xs.data(), cols);
          ASSERT_NEAR(y[r], exact.value, exact.tolerance)
              << dtype_name(type) << " " << rows << "x" << cols << " row " << r;
        }
      }
    }
  }
}

TEST_P(OpsMatvec, OneAndTwoThreadsBitIdentical) {
  const DType type = GetParam();
  ThreadPool one(1), two(2), three(3);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{301, 2048}, {67, 2080}, {1030, 512}, {5, 4096}}) {
    const TestWeights w = make_weights(type, rows, cols, 5);
    const auto x = normal_vec(static_cast<size_t>(cols), 6);
    std::vector<float> y1(static_cast<size_t>(rows)), y2(y1.size()), y3(y1.size());
    matvec(w.view(), x.data(), y1.data(), one);
    matvec(w.view(), x.data(), y2.data(), two);
    matvec(w.view(), x.data(), y3.data(), three);
    ASSERT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * 4)) << rows << "x" << cols;
    ASSERT_EQ(0, std::memcmp(y1.data(), y3.data(), y1.size() * 4)) << rows << "x" << cols;
  }
}

// Decode's fused q/k/v and gate/up products: each output equals matvec's bit for bit, for any
// thread count (the matrices share one dispatch; a chunk that spans two is done as two ranges).
TEST_P(OpsMatvec, MultiEqualsSeparateMatvecs) {
  const DType type = GetParam();
  ThreadPool one(1), two(2), three(3);
  const int64_t cols = 2048;
  const TestWeights a = make_weights(type, 301, cols, 11), b = make_weights(type, 64, cols, 12),
                    c = make_weights(type, 1030, cols, 13);
  const auto x = normal_vec(static_cast<size_t>(cols), 14);
  const WeightView views[] = {a.view(), b.view(), c.view()};
  std::vector<std::vector<float>> separate(3);
  for (int i = 0; i < 3; ++i) {
    separate[i].resize(static_cast<size_t>(views[i].rows));
    matvec(views[i], x.data(), separate[i].data(), one);
  }
  for (ThreadPool* pool : {&one, &two, &three}) {
    std::vector<std::vector<float>> fused(3);
    float* ys[3];
    for (int i = 0; i < 3; ++i) {
      fused[i].assign(static_cast<size_t>(views[i].rows), -1.0f);
      ys[i] = fused[i].data();
    }
    matvec_multi(views, x.data(), ys, *pool);
    for (int i = 0; i < 3; ++i)
      ASSERT_EQ(0, std::memcmp(separate[i].data(), fused[i].data(), separate[i].size() * 4))
          << dtype_name(type) << " matrix " << i << " threads " << pool->size();
  }
  // Mixed types or widths fall back to one product each, with the same results.
  const TestWeights other = make_weights(type == DType::F32 ? DType::F16 : DType::F32, 40, cols, 15);
  std::vector<float> y_other(40), y_other_ref(40), y_a(301);
  const WeightView mixed[] = {a.view(), other.view()};
  float* mixed_ys[] = {y_a.data(), y_other.data()};
  matvec_multi(mixed, x.data(), mixed_ys, two);
  matvec(other.view(), x.data(), y_other_ref.data(), one);
  EXPECT_EQ(0, std::memcmp(y_a.data(), separate[0].data(), y_a.size() * 4));
  EXPECT_EQ(0, std::memcmp(y_other.data(), y_other_ref.data(), y_other.size() * 4));
}

// Decode's schedule: every index of [0, n) handed out exactly once, in chunks that never grow,
// are at least min_chunk (but for the last) and at most what is left / divisor (but for the
// min), also when several threads claim at once.
TEST(GuidedQueue, CoversEachIndexOnceInShrinkingChunks) {
  for (const auto& [n, min_chunk, divisor] :
       {std::tuple<int64_t, int64_t, int64_t>{1000, 16, 4}, {7, 16, 4}, {1, 1, 1}, {0, 4, 2}, {4099, 1, 6}}) {
    detail::GuidedQueue q(n, min_chunk, divisor);
    std::vector<int> seen(static_cast<size_t>(n), 0);
    int64_t b, e, prev = n + 1, expect_begin = 0;
    while (q.pop(b, e)) {
      ASSERT_EQ(b, expect_begin);
      ASSERT_GT(e, b);
      const int64_t left = n - b, size = e - b;
      EXPECT_EQ(size, std::min(left, std::max(min_chunk, left / divisor))) << "n=" << n << " at " << b;
      EXPECT_LE(size, prev);
      prev = size;
      for (int64_t i = b; i < e; ++i) ++seen[static_cast<size_t>(i)];
      expect_begin = e;
    }
    EXPECT_EQ(expect_begin, n);
    for (int c : seen) ASSERT_EQ(c, 1);
  }
  // Four threads at once: still every index exactly once.
  const int64_t n = 100000;
  detail::GuidedQueue q(n, 3, 8);
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      int64_t b, e;
      while (q.pop(b, e))
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
  for (auto& t : threads) t.join();
  for (const auto& h : hits) ASSERT_EQ(h.load(), 1);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, OpsMatvec, ::testing::ValuesIn(kAllTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(OpsMatvecErrors, RejectsBadShapes) {
  ThreadPool pool(1);
  std::vector<uint8_t> data(1024);
  float x[64] = {}, y[4];
  EXPECT_THROW(matvec(WeightView{DType::Q8_0, data.data(), 1, 33}, x, y, pool), Error);
  EXPECT_THROW(matmul(WeightView{DType::Q8_0, data.data(), 1, 33}, x, 1, y, pool), Error);
}

// ---------------------------------------------------------------------------------------------
// matmul

class OpsMatmul : public ::testing::TestWithParam<DType> {};

TEST_P(OpsMatmul, MatchesDoubleReference) {
  const DType type = GetParam();
  ThreadPool pool(2);
  uint32_t seed = 100;
  struct Shape {
    int64_t n, rows, cols;
  };
  const Shape shapes[] = {{1, 3, 32},   {2, 1, 64},      {5, 17, 96},   {13, 3, 2080}, {7, 45, 32},
                          {37, 17, 96}, {29, 100, 1024}, {64, 70, 544}, {12, 32, 256}, {25, 33, 2080}};
  std::vector<Shape> all(std::begin(shapes), std::end(shapes));
  if (type != DType::Q8_0) all.insert(all.end(), {{3, 5, 1}, {14, 19, 7}, {26, 40, 300}, {13, 33, 517}});
  for (const Shape& s : all) {
    const TestWeights w = make_weights(type, s.rows, s.cols, seed++);
    const auto x = normal_vec(static_cast<size_t>(s.n * s.cols), seed++);
    std::vector<float> y(static_cast<size_t>(s.n * s.rows), -1.0f);
    matmul(w.view(), x.data(), s.n, y.data(), pool);
    for (int64_t t = 0; t < s.n; ++t) {
      for (int64_t r = 0; r < s.rows; ++r) {
        const float* wr = w.deq.data() + r * s.cols;
        const float* xt = x.data() + t * s.cols;
        const Expected e = reference_dot(type, wr, xt, s.cols);
        ASSERT_NEAR(y[t * s.rows + r], e.value, e.tolerance)
            << dtype_name(type) << " n=" << s.n << " " << s.rows << "x" << s.cols << " t=" << t << " r=" << r;
        if (type == DType::Q8_0) {
          ASSERT_NEAR(y[t * s.rows + r], reference_dot_quantised_x(wr, xt, s.cols),
                      1e-5 * std::sqrt(double(s.cols)) + 1e-4 * std::fabs(e.value));
        } else {
          const auto xs = x_as_kernels_see_it(type, xt, s.cols, s.n);
          const Expected exact = reference_dot(DType::F32, wr, xs.data(), s.cols);
          ASSERT_NEAR(y[t * s.rows + r], exact.value, exact.tolerance)
              << dtype_name(type) << " n=" << s.n << " " << s.rows << "x" << s.cols << " t=" << t << " r=" << r;
        }
      }
    }
  }
}

TEST_P(OpsMatmul, ThreadCountDoesNotChangeResults) {
  const DType type = GetParam();
  ThreadPool one(1), two(2), three(3);
  const int64_t n = 41, rows = 133, cols = 1024;
  const TestWeights w = make_weights(type, rows, cols, 7);
  const auto x = normal_vec(static_cast<size_t>(n * cols), 8);
  std::vector<float> y1(static_cast<size_t>(n * rows)), y2(y1.size()), y3(y1.size());
  matmul(w.view(), x.data(), n, y1.data(), one);
  matmul(w.view(), x.data(), n, y2.data(), two);
  matmul(w.view(), x.data(), n, y3.data(), three);
  EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * 4));
  EXPECT_EQ(0, std::memcmp(y1.data(), y3.data(), y1.size() * 4));
}

INSTANTIATE_TEST_SUITE_P(AllTypes, OpsMatmul, ::testing::ValuesIn(kAllTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Attention's single-threaded products: strided X and Y, W as given (nt) or transposed (nn),
// overwrite then accumulate, against double sums; the Y entries outside the product stay put.
TEST(OpsGemmF32, StridedNtAndNnMatchDoubleReferenceAndAccumulate) {
  struct Shape {
    int64_t n, rows, k;
  };
  uint32_t seed = 500;
  for (const Shape sh :
       {Shape{1, 1, 1}, Shape{13, 33, 64}, Shape{128, 256, 64}, Shape{25, 64, 300}, Shape{7, 5, 17}, Shape{3, 4, 0}}) {
    const int64_t ldx = sh.k + 3, ldy = sh.rows + 5;
    const auto x = normal_vec(size_t(sh.n * ldx), seed++);
    const auto w = normal_vec(size_t(sh.rows * sh.k), seed++);  // nt: rows x k; nn: read as k x rows
    const auto y0 = normal_vec(size_t(sh.n * ldy), seed++);
    for (bool transposed : {false, true}) {
      for (bool accumulate : {false, true}) {
        std::vector<float> y = y0;
        if (transposed)
          gemm_f32_nn(x.data(), ldx, sh.n, w.data(), sh.k, sh.rows, y.data(), ldy, accumulate);
        else
          gemm_f32_nt(x.data(), ldx, sh.n, w.data(), sh.rows, sh.k, y.data(), ldy, accumulate);
        for (int64_t t = 0; t < sh.n; ++t)
          for (int64_t j = 0; j < ldy; ++j) {
            const size_t at = size_t(t * ldy + j);
            if (j >= sh.rows) {
              ASSERT_EQ(y[at], y0[at]) << "outside the product";
              continue;
            }
            double want = accumulate ? y0[at] : 0.0, mag = std::fabs(want);
            for (int64_t c = 0; c < sh.k; ++c) {
              const double wv = transposed ? w[size_t(c * sh.rows + j)] : w[size_t(j * sh.k + c)];
              want += double(x[size_t(t * ldx + c)]) * wv;
              mag += std::fabs(double(x[size_t(t * ldx + c)]) * wv);
            }
            ASSERT_NEAR(y[at], want, 1e-5 * mag + 1e-6)
                << (transposed ? "nn " : "nt ") << sh.n << "x" << sh.rows << "x" << sh.k << " t=" << t << " j=" << j;
          }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// element-wise kernels

TEST(OpsElementwise, Rmsnorm) {
  for (int64_t n : {1, 7, 16, 33, 2048}) {
    const auto x = normal_vec(static_cast<size_t>(n), 11);
    const auto w = normal_vec(static_cast<size_t>(n), 12);
    std::vector<float> y(static_cast<size_t>(n));
    rmsnorm(x.data(), w.data(), y.data(), n, 1e-5f);
    double ss = 0.0;
    for (float v : x) ss += double(v) * v;
    const double scale = 1.0 / std::sqrt(ss / n + 1e-5);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(y[i], x[i] * scale * w[i], 1e-5 * std::fabs(x[i] * scale * w[i]) + 1e-7);
  }
  // In place is allowed.
  auto x = normal_vec(100, 13);
  const auto w = normal_vec(100, 14);
  std::vector<float> expect(100);
  rmsnorm(x.data(), w.data(), expect.data(), 100, 1e-6f);
  rmsnorm(x.data(), w.data(), x.data(), 100, 1e-6f);
  EXPECT_EQ(x, expect);
}

TEST(OpsElementwise, SoftmaxSumsToOneAndMatchesReference) {
  for (int64_t n : {1, 2, 15, 16, 17, 100, 2048, 4099}) {
    auto x = normal_vec(static_cast<size_t>(n), 21, 5.0f);
    if (n > 3) x[3] = -std::numeric_limits<float>::infinity();  // a masked entry
    if (n > 10) x[10] = 80.0f;                                  // large logits stay stable
    const auto orig = x;
    softmax_inplace(x.data(), n);
    double mx = -INFINITY;
    for (float v : orig) mx = std::max(mx, double(v));
    double sum = 0.0;
    for (float v : orig) sum += std::exp(double(v) - mx);
    double got_sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const double ref = std::exp(double(orig[i]) - mx) / sum;
      ASSERT_NEAR(x[i], ref, 2e-6 * ref + 1e-30) << "n=" << n << " i=" << i;
      got_sum += x[i];
    }
    EXPECT_NEAR(got_sum, 1.0, 1e-5) << n;
    if (n > 3) {
      EXPECT_EQ(x[3], 0.0f);
    }
  }
  float all_masked[3] = {-INFINITY, -INFINITY, -INFINITY};
  softmax_inplace(all_masked, 3);
  for (float v : all_masked) EXPECT_FALSE(std::isnan(v));
}

TEST(OpsElementwise, ExpAccuracyThroughSoftmax) {
  // softmax of {v, 0} = 1 / (1 + e^-v): exercises exp over its whole range incl. subnormals.
  for (double v = -100.0; v <= 100.0; v += 0.37) {
    float x[2] = {0.0f, static_cast<float>(v)};
    softmax_inplace(x, 2);
    const double e = std::exp(double(static_cast<float>(v)));
    const double p0 = 1.0 / (1.0 + e), p1 = e / (1.0 + e);
    ASSERT_NEAR(x[0], p0, 1e-6 * p0 + 1e-44) << v;
    ASSERT_NEAR(x[1], p1, 1e-6 * p1 + 1e-44) << v;
  }
}

TEST(OpsElementwise, Swiglu) {
  for (int64_t n : {1, 5, 16, 31, 8192}) {
    auto g = normal_vec(static_cast<size_t>(n), 31, 4.0f);
    const auto u = normal_vec(static_cast<size_t>(n), 32);
    if (n > 4) {
      g[0] = 100.0f;
      g[1] = -100.0f;
      g[2] = 0.0f;
      g[3] = -1000.0f;
      g[4] = 1000.0f;
    }
    std::vector<float> out(static_cast<size_t>(n));
    swiglu(g.data(), u.data(), out.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double ref = double(g[i]) / (1.0 + std::exp(-double(g[i]))) * u[i];
      ASSERT_NEAR(out[i], ref, 1e-6 * std::fabs(ref) + 1e-30) << "i=" << i << " g=" << g[i];
      ASSERT_FALSE(std::isnan(out[i]));
    }
  }
}

TEST(OpsElementwise, AddAxpyDot) {
  for (int64_t n : {0, 1, 15, 16, 17, 64, 1000, 2049}) {
    const auto a = normal_vec(static_cast<size_t>(n), 41);
    const auto b = normal_vec(static_cast<size_t>(n), 42);
    auto y = b;
    add_inplace(y.data(), a.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], b[i] + a[i]);
    y = b;
    axpy(0.75f, a.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(y[i], b[i] + 0.75 * a[i], 1e-6 * (std::fabs(b[i]) + std::fabs(a[i])));
    double ref = 0.0, abs_sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      ref += double(a[i]) * b[i];
      abs_sum += std::fabs(double(a[i]) * b[i]);
    }
    EXPECT_NEAR(dot(a.data(), b.data(), n), ref, 1e-6 * abs_sum + 1e-30) << n;
  }
}

// ---------------------------------------------------------------------------------------------
// rope

TEST(OpsRope, HandComputedAdjacentPairs) {
  // head_dim 4, n_rot 4, base 10000, pos 1: theta_0 = 1, theta_1 = 10000^(-1/2) = 0.01.
  float x[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  RopeConfig cfg;
  cfg.head_dim = 4;
  cfg.n_rot = 4;
  cfg.base = 10000.0f;
  rope_inplace(x, 1, 1, cfg);
  const double c0 = std::cos(1.0), s0 = std::sin(1.0), c1 = std::cos(0.01), s1 = std::sin(0.01);
  EXPECT_NEAR(x[0], 1 * c0 - 2 * s0, 1e-6);
  EXPECT_NEAR(x[1], 1 * s0 + 2 * c0, 1e-6);
  EXPECT_NEAR(x[2], 3 * c1 - 4 * s1, 1e-6);
  EXPECT_NEAR(x[3], 3 * s1 + 4 * c1, 1e-6);
}

TEST(OpsRope, HandComputedNeoxHalves) {
  float x[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  RopeConfig cfg;
  cfg.head_dim = 4;
  cfg.n_rot = 4;
  cfg.base = 10000.0f;
  cfg.neox = true;
  rope_inplace(x, 1, 1, cfg);
  // pairs (x0, x2) at theta 1 and (x1, x3) at theta 0.01
  const double c0 = std::cos(1.0), s0 = std::sin(1.0), c1 = std::cos(0.01), s1 = std::sin(0.01);
  EXPECT_NEAR(x[0], 1 * c0 - 3 * s0, 1e-6);
  EXPECT_NEAR(x[2], 1 * s0 + 3 * c0, 1e-6);
  EXPECT_NEAR(x[1], 2 * c1 - 4 * s1, 1e-6);
  EXPECT_NEAR(x[3], 2 * s1 + 4 * c1, 1e-6);
}

TEST(OpsRope, FreqFactorsDivideTheAngle) {
  float x[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  const float factors[2] = {1.0f, 4.0f};
  RopeConfig cfg;
  cfg.head_dim = 4;
  cfg.n_rot = 4;
  cfg.base = 10000.0f;
  cfg.freq_factors = factors;
  rope_inplace(x, 1, 3, cfg);
  // pos 3: theta_0 = 3, theta_1 = 3 * 0.01 / 4 = 0.0075
  const double c0 = std::cos(3.0), s0 = std::sin(3.0), c1 = std::cos(0.0075), s1 = std::sin(0.0075);
  EXPECT_NEAR(x[0], 1 * c0 - 2 * s0, 1e-6);
  EXPECT_NEAR(x[1], 1 * s0 + 2 * c0, 1e-6);
  EXPECT_NEAR(x[2], 3 * c1 - 4 * s1, 1e-6);
  EXPECT_NEAR(x[3], 3 * s1 + 4 * c1, 1e-6);
}

TEST(OpsRope, PartialRotationAndManyHeads) {
  // head_dim 8 with n_rot 4: dims 4..7 of each head are untouched; every head rotates alike.
  const int heads = 3, hd = 8;
  auto x = normal_vec(heads * hd, 51);
  const auto orig = x;
  RopeConfig cfg;
  cfg.head_dim = hd;
  cfg.n_rot = 4;
  cfg.base = 500000.0f;
  const int64_t pos = 12345;
  rope_inplace(x.data(), heads, pos, cfg);
  for (int h = 0; h < heads; ++h) {
    for (int i = 0; i < 2; ++i) {
      const double theta = double(pos) * std::pow(500000.0, -2.0 * i / 4);
      const double a = orig[h * hd + 2 * i], b = orig[h * hd + 2 * i + 1];
      EXPECT_NEAR(x[h * hd + 2 * i], a * std::cos(theta) - b * std::sin(theta), 2e-6);
      EXPECT_NEAR(x[h * hd + 2 * i + 1], a * std::sin(theta) + b * std::cos(theta), 2e-6);
    }
    for (int d = 4; d < hd; ++d) EXPECT_EQ(x[h * hd + d], orig[h * hd + d]);
  }
  // Position 0 is the identity.
  auto y = orig;
  rope_inplace(y.data(), heads, 0, cfg);
  EXPECT_EQ(y, orig);
  cfg.n_rot = 3;
  EXPECT_THROW(rope_inplace(y.data(), heads, 1, cfg), Error);
}

// ---------------------------------------------------------------------------------------------
// thread pool

TEST(OpsThreadPool, ParallelForCoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 3, 7, 64, 100, 1000, 4097}) {
      for (int64_t grain : {1, 3, 4, 16, 1000}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<int> calls{0};
        std::atomic<bool> bad_range{false};
        pool.parallel_for(
            n,
            [&](int64_t b, int64_t e) {
              calls.fetch_add(1);
              if (b >= e || b % grain != 0 || (e != n && e % grain != 0)) bad_range = true;
              for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
            },
            grain);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << n << "/" << grain << "/" << i;
        EXPECT_FALSE(bad_range) << n << "/" << grain;
        EXPECT_LE(calls.load(), threads);
      }
    }
  }
}

TEST(OpsThreadPool, RunCallsEveryThreadIndexOnce) {
  for (int threads : {1, 2, 5}) {
    ThreadPool pool(threads);
    for (int rep = 0; rep < 200; ++rep) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(threads));
      pool.run([&](int t, int nt) {
        EXPECT_EQ(nt, threads);
        seen[static_cast<size_t>(t)].fetch_add(1);
      });
      for (auto& s : seen) ASSERT_EQ(s.load(), 1);
    }
  }
}

TEST(OpsThreadPool, ManyRapidDispatchesAndSleepingWorkers) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  for (int i = 0; i < 20000; ++i) {
    pool.parallel_for_fn(2, [&](int64_t b, int64_t e) { total.fetch_add(e - b, std::memory_order_relaxed); });
  }
  EXPECT_EQ(total.load(), 40000);
  // Let the workers go to sleep, then dispatch again.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (int i = 0; i < 3; ++i) {
    pool.parallel_for_fn(2, [&](int64_t b, int64_t e) { total.fetch_add(e - b, std::memory_order_relaxed); });
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(total.load(), 40006);
}

TEST(OpsThreadPool, ExceptionsPropagateAndPoolStaysUsable) {
  ThreadPool pool(3);
  EXPECT_THROW(pool.run([](int t, int) {
    if (t == 2) throw std::runtime_error("worker failure");
  }),
               std::runtime_error);
  EXPECT_THROW(pool.run([](int t, int) {
    if (t == 0) throw std::runtime_error("caller failure");
  }),
               std::runtime_error);
  std::atomic<int> n{0};
  pool.run([&](int, int) { n.fetch_add(1); });
  EXPECT_EQ(n.load(), 3);
}

TEST(OpsThreadPool, NestedDispatchRunsInline) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  pool.run([&](int, int) { pool.parallel_for(10, [&](int64_t b, int64_t e) { total.fetch_add(e - b); }); });
  EXPECT_EQ(total.load(), 20);
}

}  // namespace
}  // namespace kvslim
