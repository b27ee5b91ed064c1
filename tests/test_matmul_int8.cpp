// The int8 prefill GEMMs (AVX2 maddubs, AVX-512 VNNI, AMX-INT8 tiles; on aarch64 NEON sdot at
// dotprod and smmla at i8mm) at every instruction-set level of this CPU that has one, on shapes
// that are not whole tiles, against a double reference with the activations quantised as the
// kernels do, and against each other bit for bit (their int32 sums are exact and their f32 steps
// the same).
#include <gtest/gtest.h>

#include <algorithm>
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

// The levels of this CPU whose build has an int8 GEMM that takes `type`.
std::vector<Isa> int8_gemm_levels(DType type = DType::Q8_0) {
  std::vector<Isa> levels;
  for (Isa isa : supported_isas()) {
    const ScopedIsa scoped(isa);
    if (detail::matmul_q8_takes(type)) levels.push_back(isa);
  }
  return levels;
}

// Runs every int8 GEMM path of every level in `levels` on (w, x), checks each result against
// the double reference (deq: w dequantised), and checks that all results have the same bits.
void check_all_paths(const std::vector<Isa>& levels, const WeightView& w, const std::vector<float>& deq,
                     const std::vector<float>& x, int64_t n, const std::string& what) {
  ThreadPool pool(2);
  std::vector<float> first;
  std::string first_name;
  for (Isa isa : levels) {
    const ScopedIsa scoped(isa);
    std::vector<detail::Int8Gemm> paths = {detail::Int8Gemm::Vnni};
    if (detail::amx_int8_usable()) paths.push_back(detail::Int8Gemm::Amx);
    for (detail::Int8Gemm path : paths) {
      const std::string name =
          std::string(isa_name(isa)) + (path == detail::Int8Gemm::Amx ? "/amx" : "/vector") + " " + what;
      std::vector<float> y(static_cast<size_t>(n * w.rows), -1.0f);
      detail::matmul_q8(w, x.data(), n, y.data(), pool, path);
      for (int64_t t = 0; t < n; ++t) {
        const auto xq = quantised_x(x.data() + t * w.cols, w.cols);
        for (int64_t r = 0; r < w.rows; ++r) {
          const float* wr = deq.data() + r * w.cols;
          double want = 0.0, mag = 0.0;
          for (int64_t b = 0; b < w.cols / 32; ++b) {
            // Kernels apply a block's min separately from its levels; |min| <= the block's max |w|.
            double wmax = 0.0;
            for (int j = 0; j < 32; ++j) wmax = std::max(wmax, std::fabs(double(wr[b * 32 + j])));
            for (int j = 0; j < 32; ++j) {
              const int64_t c = b * 32 + j;
              want += double(wr[c]) * xq[c];
              mag += (std::fabs(double(wr[c])) + wmax) * std::fabs(xq[c]);
            }
          }
          // Integer sums are exact; only f32 scaling and accumulation round.
          ASSERT_NEAR(y[static_cast<size_t>(t * w.rows + r)], want, 2e-5 * mag + 1e-6)
              << name << " t=" << t << " r=" << r;
        }
      }
      if (first.empty()) {
        first = y;
        first_name = name;
        continue;
      }
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_EQ(0, std::memcmp(&y[i], &first[i], 4))
            << name << " differs from " << first_name << " at " << i << ": " << y[i] << " vs " << first[i];
      }
    }
  }
}

struct Shape {
  int64_t n, rows, cols;
};

class Int8Gemm : public ::testing::TestWithParam<DType> {};

TEST_P(Int8Gemm, EveryLevelMatchesReferenceAndTheOthersOnOddShapes) {
  const DType type = GetParam();
  const auto levels = int8_gemm_levels(type);
  if (levels.empty()) GTEST_SKIP() << "no level with an int8 GEMM for " << dtype_name(type) << " on this CPU";
  const bool k_quant = dtype_block_size(type) == 256;  // q2_K .. q6_K, iq4_xs
  // M (tokens), N (rows) and K (blocks) around the tile sizes (4 / 6 / 16 / 32 tokens, 16 / 32
  // rows, 128-row weight groups, 16-block K slices): 1 short of, 1 past, and far from whole tiles.
  std::vector<Shape> shapes;
  if (k_quant) {
    shapes = {{2, 1, 256}, {17, 33, 256}, {33, 47, 768}, {31, 15, 512}, {48, 65, 1280}, {19, 131, 256}};
  } else {
    shapes = {{2, 3, 32},  {17, 33, 64},  {15, 31, 96},   {33, 47, 288},
              {50, 1, 32}, {31, 65, 544}, {40, 40, 1056}, {21, 150, 96}};
  }
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
    check_all_paths(levels, w, deq, x, s.n,
                    std::string(dtype_name(type)) + " " + std::to_string(s.n) + "x" + std::to_string(s.rows) + "x" +
                        std::to_string(s.cols));
  }
}

// Random bit patterns for the levels (so every level occurs, q8_0's -128 included, and whole
// blocks of the largest level) against activation blocks of one value (every q = +-127): the
// largest int16 pair sums an AVX2 chain can reach. A chain one quad too long saturates here.
TEST_P(Int8Gemm, ExtremeLevelsAndActivationsStayExact) {
  const DType type = GetParam();
  const auto levels = int8_gemm_levels(type);
  if (levels.empty()) GTEST_SKIP() << "no level with an int8 GEMM for " << dtype_name(type) << " on this CPU";
  const int64_t n = 9, rows = 37, cols = 512;
  const size_t rb = row_bytes(type, cols);
  const size_t block_bytes = dtype_block_bytes(type);
  const bool has_min = type == DType::Q4_1 || type == DType::Q5_1 || type == DType::Q4_K || type == DType::Q5_K;
  const uint16_t dmin_bits = fp32_to_fp16(0.25f);
  std::mt19937 rng(7);
  std::vector<uint8_t> data(rb * rows);
  for (auto& byte : data) byte = static_cast<uint8_t>(rng());
  for (size_t off = 0; off < data.size(); off += block_bytes) {
    // Rows 0-3: every level the largest (all bits set) or the smallest (no bits set).
    const int64_t row = static_cast<int64_t>(off / rb);
    if (row < 4) std::memset(&data[off], row % 2 == 0 ? 0xFF : 0x00, block_bytes);
    if (type == DType::MXFP4) {  // its E8M0 byte: scales 2^-4 .. 2^1, not any power of two up to 2^127
      data[off] = static_cast<uint8_t>(124 + rng() % 6);
    } else if (type == DType::Q2_K) {  // d and dmin last; its 4-bit scales and mins stay random
      const uint16_t d = fp32_to_fp16(0.5f + static_cast<float>(rng() % 1000) / 1000.0f);
      std::memcpy(&data[off + block_bytes - 4], &d, 2);
      std::memcpy(&data[off + block_bytes - 2], &dmin_bits, 2);
    } else {
      // q3_K and q6_K keep d last (their sub-scales stay random: q6_K's -128 and 127 occur, q3_K's
      // -32 and 31); the others first.
      const bool d_last = type == DType::Q3_K || type == DType::Q6_K;
      const uint16_t d = fp32_to_fp16(0.5f + static_cast<float>(rng() % 1000) / 1000.0f);
      std::memcpy(&data[off + (d_last ? block_bytes - 2 : 0)], &d, 2);
    }
    if (has_min) {
      const uint16_t m = fp32_to_fp16(static_cast<float>(rng() % 1000) / 2000.0f);
      std::memcpy(&data[off + 2], &m, 2);
    }
  }
  std::vector<float> deq(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) convert_to_f32(type, data.data() + rb * r, deq.data() + r * cols, cols);
  const WeightView w{type, data.data(), rows, cols};
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t b = 0; b < cols / 32; ++b) {
      const float v = (rng() % 2 == 0 ? 1.0f : -1.0f) * (0.25f + static_cast<float>(rng() % 100));
      std::fill_n(x.begin() + t * cols + b * 32, 32, v);
    }
  }
  check_all_paths(levels, w, deq, x, n, std::string(dtype_name(type)) + " extremes");
}

// At a level with an int8 GEMM, a block-type prefill (public matmul) takes it.
TEST_P(Int8Gemm, MatmulTakesTheInt8Gemm) {
  const DType type = GetParam();
  const int64_t n = 7, rows = 19, cols = 256;
  const auto src = normal_vec(static_cast<size_t>(rows * cols), 11);
  const size_t rb = row_bytes(type, cols);
  std::vector<uint8_t> data(rb * rows);
  for (int64_t r = 0; r < rows; ++r) convert_from_f32(src.data() + r * cols, type, data.data() + rb * r, cols);
  const WeightView w{type, data.data(), rows, cols};
  const auto x = normal_vec(static_cast<size_t>(n * cols), 12);
  ThreadPool pool(2);
  int checked = 0;
  for (Isa isa : int8_gemm_levels(type)) {
    const ScopedIsa scoped(isa);
    std::vector<float> a(static_cast<size_t>(n * rows)), b(a.size());
    matmul(w, x.data(), n, a.data(), pool);
    detail::matmul_q8(w, x.data(), n, b.data(), pool);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << isa_name(isa);
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no level with an int8 GEMM for " << dtype_name(type) << " on this CPU";
}

INSTANTIATE_TEST_SUITE_P(BlockTypes, Int8Gemm,
                         ::testing::Values(DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q4_K,
                                           DType::Q5_K, DType::Q2_K, DType::Q3_K, DType::Q6_K, DType::IQ4_NL,
                                           DType::IQ4_XS, DType::MXFP4),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Int8GemmPaths, ThreadCountDoesNotChangeResults) {
  const auto levels = int8_gemm_levels();
  if (levels.empty()) GTEST_SKIP() << "no level with an int8 GEMM on this CPU";
  const int64_t n = 45, rows = 133, cols = 1024;
  const auto src = normal_vec(static_cast<size_t>(rows * cols), 3);
  const size_t rb = row_bytes(DType::Q8_0, cols);
  std::vector<uint8_t> data(rb * rows);
  for (int64_t r = 0; r < rows; ++r) convert_from_f32(src.data() + r * cols, DType::Q8_0, data.data() + rb * r, cols);
  const WeightView w{DType::Q8_0, data.data(), rows, cols};
  const auto x = normal_vec(static_cast<size_t>(n * cols), 4);
  ThreadPool one(1), three(3);
  for (Isa isa : levels) {
    const ScopedIsa scoped(isa);
    std::vector<detail::Int8Gemm> paths = {detail::Int8Gemm::Vnni};
    if (detail::amx_int8_usable()) paths.push_back(detail::Int8Gemm::Amx);
    for (detail::Int8Gemm path : paths) {
      std::vector<float> y1(static_cast<size_t>(n * rows)), y3(y1.size());
      detail::matmul_q8(w, x.data(), n, y1.data(), one, path);
      detail::matmul_q8(w, x.data(), n, y3.data(), three, path);
      EXPECT_EQ(0, std::memcmp(y1.data(), y3.data(), y1.size() * 4))
          << isa_name(isa) << (path == detail::Int8Gemm::Amx ? "/amx" : "/vector");
    }
  }
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
