// Block-quantised types q4_0 .. q6_k: dequantisation of hand-built blocks against values worked
// out from the format, quantise -> dequantise error bounds, names / ids / sizes, bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/dtype.h"
#include "util/error.h"

namespace kvslim {
namespace {

std::vector<float> dequant(DType type, const void* block, int64_t n) {
  std::vector<float> y(n);
  convert_to_f32(type, block, y.data(), n);
  return y;
}

// fp16 bit patterns of small exact values.
const uint16_t kHalf = 0x3800;      // 0.5
const uint16_t kTwo = 0x4000;       // 2
const uint16_t kMinusOne = 0xBC00;  // -1
const uint16_t kQuarter = 0x3400;   // 0.25

TEST(QuantTypes, NamesIdsAndSizesFollowGgml) {
  struct Row {
    DType t;
    const char* name;
    uint32_t id;
    int64_t block;
    size_t bytes;
  };
  const Row rows[] = {{DType::Q4_0, "q4_0", 2, 32, 18},        {DType::Q4_1, "q4_1", 3, 32, 20},
                      {DType::Q5_0, "q5_0", 6, 32, 22},        {DType::Q5_1, "q5_1", 7, 32, 24},
                      {DType::Q2_K, "q2_k", 10, 256, 84},      {DType::Q3_K, "q3_k", 11, 256, 110},
                      {DType::Q4_K, "q4_k", 12, 256, 144},     {DType::Q5_K, "q5_k", 13, 256, 176},
                      {DType::Q6_K, "q6_k", 14, 256, 210},     {DType::IQ4_NL, "iq4_nl", 20, 32, 18},
                      {DType::IQ4_XS, "iq4_xs", 23, 256, 136}, {DType::MXFP4, "mxfp4", 39, 32, 17}};
  for (const Row& r : rows) {
    EXPECT_STREQ(dtype_name(r.t), r.name);
    EXPECT_EQ(dtype_from_name(r.name), r.t);
    EXPECT_EQ(ggml_type_id(r.t), r.id);
    EXPECT_EQ(dtype_from_ggml(r.id), r.t);
    EXPECT_EQ(dtype_block_size(r.t), r.block);
    EXPECT_EQ(row_bytes(r.t, 2 * r.block), 2 * r.bytes);
  }
  EXPECT_DOUBLE_EQ(dtype_bits_per_weight(DType::Q4_0), 4.5);
  EXPECT_DOUBLE_EQ(dtype_bits_per_weight(DType::Q6_K), 6.5625);
  EXPECT_DOUBLE_EQ(dtype_bits_per_weight(DType::IQ4_NL), 4.5);
  EXPECT_DOUBLE_EQ(dtype_bits_per_weight(DType::IQ4_XS), 4.25);
  EXPECT_DOUBLE_EQ(dtype_bits_per_weight(DType::MXFP4), 4.25);
}

TEST(QuantTypes, RowLengthThatIsNotWholeBlocksIsAClearError) {
  try {
    (void)row_bytes(DType::Q4_K, 300);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q4_k row length 300 is not a multiple of its block size 256"),
              std::string::npos)
        << e.what();
  }
  std::vector<float> x(48, 1.0f);
  std::vector<uint8_t> buf(1024);
  EXPECT_THROW(convert_from_f32(x.data(), DType::Q4_0, buf.data(), 48), Error);
  EXPECT_THROW(convert_to_f32(DType::Q6_K, buf.data(), x.data(), 48), Error);
  EXPECT_THROW(dtype_from_ggml(16), Error);  // iq2_xxs: unsupported, named in the message
}

TEST(QuantDequant, Q4_0NibblesAndOffset) {
  BlockQ4_0 b{};
  b.d = kHalf;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = dequant(DType::Q4_0, &b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * (j - 8)) << j;            // low nibbles: first half
    EXPECT_EQ(y[j + 16], 0.5f * (15 - j - 8)) << j;  // high nibbles: second half
  }
  EXPECT_EQ(y[0], -4.0f);  // q = 0 -> -8 d
  EXPECT_EQ(y[16], 3.5f);  // q = 15 -> 7 d
}

TEST(QuantDequant, Q4_1ScaleAndMin) {
  BlockQ4_1 b{};
  b.d = kTwo;
  b.m = kMinusOne;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (j << 4));
  const auto y = dequant(DType::Q4_1, &b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 2.0f * j - 1.0f);
    EXPECT_EQ(y[j + 16], 2.0f * j - 1.0f);
  }
}

TEST(QuantDequant, Q5_0FifthBitFromQh) {
  BlockQ5_0 b{};
  b.d = kQuarter;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const uint32_t qh = 0xA5C3F00Fu;  // bit i = 5th bit of value i
  std::memcpy(b.qh, &qh, 4);
  const auto y = dequant(DType::Q5_0, &b, 32);
  for (int i = 0; i < 32; ++i) {
    const int low = i < 16 ? i : 15 - (i - 16);
    const int q = low | (((qh >> i) & 1) << 4);
    EXPECT_EQ(y[i], 0.25f * (q - 16)) << i;
  }
}

TEST(QuantDequant, Q5_1FifthBitScaleAndMin) {
  BlockQ5_1 b{};
  b.d = kHalf;
  b.m = kTwo;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>((j % 16) | (3 << 4));
  const uint32_t qh = 0x0001FFFEu;
  std::memcpy(b.qh, &qh, 4);
  const auto y = dequant(DType::Q5_1, &b, 32);
  for (int i = 0; i < 32; ++i) {
    const int low = i < 16 ? i : 3;
    const int q = low | (((qh >> i) & 1) << 4);
    EXPECT_EQ(y[i], 0.5f * q + 2.0f) << i;
  }
}

TEST(QuantDequant, Q2_KScalesMinsAndBitPairs) {
  BlockQ2_K b{};
  b.d = kHalf;
  b.dmin = kQuarter;
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>((j % 16) | ((15 - j) << 4));
  for (int i = 0; i < 64; ++i) b.qs[i] = static_cast<uint8_t>(i * 37 + 11);
  const auto y = dequant(DType::Q2_K, &b, 256);
  for (int i = 0; i < 256; ++i) {
    // value i: half h = i / 128 uses bytes 32h..32h+31; quarter (i % 128) / 32 is the bit pair.
    const int byte = 32 * (i / 128) + i % 32, shift = 2 * ((i % 128) / 32);
    const int q = ((byte * 37 + 11) & 0xFF) >> shift & 3;
    const int j = i / 16;
    EXPECT_EQ(y[i], 0.5f * j * q - 0.25f * (15 - j)) << i;
  }
}

TEST(QuantDequant, Q3_KSignedSixBitScalesAndHmask) {
  BlockQ3_K b{};
  b.d = kHalf;
  // Stored scales s_j (0..63, value s_j - 32): cover both extremes and the split 4+2 bit packing.
  const int s[16] = {0, 63, 32, 31, 1, 62, 17, 48, 5, 40, 33, 20, 60, 2, 47, 16};
  for (int j = 0; j < 16; ++j) {
    if (j < 8)
      b.scales[j] |= static_cast<uint8_t>(s[j] & 0xF);
    else
      b.scales[j - 8] |= static_cast<uint8_t>((s[j] & 0xF) << 4);
    b.scales[8 + j % 4] |= static_cast<uint8_t>((s[j] >> 4) << (2 * (j / 4)));
  }
  for (int i = 0; i < 64; ++i) b.qs[i] = static_cast<uint8_t>(i * 53 + 7);
  for (int i = 0; i < 32; ++i) b.hmask[i] = static_cast<uint8_t>(i * 29 + 3);
  const auto y = dequant(DType::Q3_K, &b, 256);
  for (int i = 0; i < 256; ++i) {
    const int byte = 32 * (i / 128) + i % 32, shift = 2 * ((i % 128) / 32);
    const int low = (((byte * 53 + 7) & 0xFF) >> shift) & 3;
    const int high = ((((i % 32) * 29 + 3) & 0xFF) >> (i / 32)) & 1;
    // the high bit CLEAR subtracts 4
    const int q = low - (high ? 0 : 4);
    EXPECT_EQ(y[i], 0.5f * (s[i / 16] - 32) * q) << i;
  }
}

// Writes the 6-bit scales / mins of q4_K / q5_K into the 12-byte packing.
void pack_k4(const int* sc, const int* m, uint8_t* out) {
  std::memset(out, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      out[j] = static_cast<uint8_t>(sc[j]);
      out[j + 4] = static_cast<uint8_t>(m[j]);
    } else {
      out[j + 4] = static_cast<uint8_t>((sc[j] & 0xF) | ((m[j] & 0xF) << 4));
      out[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
      out[j] |= static_cast<uint8_t>((m[j] >> 4) << 6);
    }
  }
}

TEST(QuantDequant, Q4_KPackedScalesMinsAndNibblePairs) {
  BlockQ4_K b{};
  b.d = kHalf;
  b.dmin = kQuarter;
  const int sc[8] = {63, 0, 17, 42, 33, 63, 1, 50}, m[8] = {0, 63, 5, 60, 63, 16, 47, 2};
  pack_k4(sc, m, b.scales);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>(i * 71 + 5);
  const auto y = dequant(DType::Q4_K, &b, 256);
  for (int i = 0; i < 256; ++i) {
    const int j = i / 32, byte = 32 * (j / 2) + i % 32;
    const int v = (byte * 71 + 5) & 0xFF;
    const int q = (j & 1) ? v >> 4 : v & 0xF;
    EXPECT_EQ(y[i], 0.5f * sc[j] * q - 0.25f * m[j]) << i;
  }
}

TEST(QuantDequant, Q5_KHighBitPerSubBlock) {
  BlockQ5_K b{};
  b.d = kQuarter;
  b.dmin = kHalf;
  const int sc[8] = {1, 63, 32, 16, 48, 7, 60, 33}, m[8] = {63, 0, 31, 32, 1, 62, 15, 40};
  pack_k4(sc, m, b.scales);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>(i * 89 + 13);
  for (int i = 0; i < 32; ++i) b.qh[i] = static_cast<uint8_t>(i * 41 + 19);
  const auto y = dequant(DType::Q5_K, &b, 256);
  for (int i = 0; i < 256; ++i) {
    const int j = i / 32, l = i % 32, byte = 32 * (j / 2) + l;
    const int v = (byte * 89 + 13) & 0xFF;
    const int q = ((j & 1) ? v >> 4 : v & 0xF) | ((((l * 41 + 19) & 0xFF) >> j & 1) << 4);
    EXPECT_EQ(y[i], 0.25f * sc[j] * q - 0.5f * m[j]) << i;
  }
}

TEST(QuantDequant, Q6_KLowNibblesHighPairsAndSignedScales) {
  BlockQ6_K b{};
  b.d = kQuarter;
  const int8_t sc[16] = {-128, 127, 0, 1, -1, 64, -64, 33, 100, -100, 5, -5, 77, -77, 12, -12};
  std::memcpy(b.scales, sc, 16);
  for (int i = 0; i < 128; ++i) b.ql[i] = static_cast<uint8_t>(i * 97 + 31);
  for (int i = 0; i < 64; ++i) b.qh[i] = static_cast<uint8_t>(i * 59 + 23);
  const auto y = dequant(DType::Q6_K, &b, 256);
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, r = i % 128, l = r % 32, k = r / 32;
    const int lb = ((64 * h + l + 32 * (k & 1)) * 97 + 31) & 0xFF;
    const int low = k < 2 ? lb & 0xF : lb >> 4;
    const int hb = (((32 * h + l) * 59 + 23) & 0xFF) >> (2 * k) & 3;
    const int q = (low | (hb << 4)) - 32;
    EXPECT_EQ(y[i], 0.25f * sc[i / 16] * q) << i;
  }
}

// The iq4 level table as written in the GGUF/ggml format description.
constexpr int kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

TEST(QuantDequant, IQ4_NLLooksUpEachNibbleInTheLevelTable) {
  BlockIQ4_NL b{};
  b.d = kQuarter;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  const auto y = dequant(DType::IQ4_NL, &b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.25f * kLevels[j]) << j;
    EXPECT_EQ(y[j + 16], 0.25f * kLevels[15 - j]) << j;
  }
}

TEST(QuantDequant, IQ4_XSSixBitSignedScalesPerSubBlock) {
  BlockIQ4_XS b{};
  b.d = kQuarter;
  // Stored scales 0, 63, 32, 31, 33, 1, 62, 40 (signed: -32, 31, 0, -1, 1, -31, 30, 8): low
  // nibbles two per byte, high bit pairs in scales_h.
  const int stored[8] = {0, 63, 32, 31, 33, 1, 62, 40};
  for (int j = 0; j < 8; ++j) {
    b.scales_l[j / 2] |= static_cast<uint8_t>((stored[j] & 0xF) << (4 * (j % 2)));
    b.scales_h |= static_cast<uint16_t>((stored[j] >> 4) << (2 * j));
  }
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>(i * 37 + 11);
  const auto y = dequant(DType::IQ4_XS, &b, 256);
  for (int i = 0; i < 256; ++i) {
    const int j = i / 32, l = i % 32;
    const int byte = ((16 * j + l % 16) * 37 + 11) & 0xFF;
    const int q = l < 16 ? byte & 0xF : byte >> 4;
    EXPECT_EQ(y[i], 0.25f * static_cast<float>(stored[j] - 32) * static_cast<float>(kLevels[q])) << i;
  }
}

// ---- quantise -> dequantise ----

std::vector<float> gaussian(int64_t n, uint64_t seed, float sigma) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, sigma);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng);
  return x;
}

double rms_error(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(row_bytes(t, int64_t(x.size())));
  convert_from_f32(x.data(), t, q.data(), int64_t(x.size()));
  std::vector<float> y(x.size());
  convert_to_f32(t, q.data(), y.data(), int64_t(x.size()));
  double e = 0;
  for (size_t i = 0; i < x.size(); ++i) e += double(y[i] - x[i]) * (y[i] - x[i]);
  return std::sqrt(e / x.size());
}

// Error bounds relative to sigma for Gaussian weights: a uniform quantiser with b bits over
// roughly +-3.5 sigma has rms error ~ 7 sigma / 2^b / sqrt(12). The bounds below are that
// estimate with headroom (the searches of the K-quants beat it; measured values in comments).
TEST(QuantRoundTrip, RmsErrorWithinBoundsForGaussianWeights) {
  const auto x = gaussian(256 * 64, 3, 1.0f);
  struct Bound {
    DType t;
    double max_rel;
  };
  const Bound bounds[] = {{DType::Q4_0, 0.12},    // measured ~0.10
                          {DType::Q4_1, 0.10},    // ~0.08
                          {DType::Q5_0, 0.06},    // ~0.05
                          {DType::Q5_1, 0.05},    // ~0.04
                          {DType::Q2_K, 0.40},    // ~0.30
                          {DType::Q3_K, 0.20},    // ~0.15
                          {DType::Q4_K, 0.10},    // ~0.08
                          {DType::Q5_K, 0.05},    // ~0.04
                          {DType::Q6_K, 0.025},   // ~0.02
                          {DType::IQ4_NL, 0.11},  // ~0.09 (finer levels near 0 than q4_0)
                          {DType::IQ4_XS, 0.11}};
  double prev_bits = 0;
  (void)prev_bits;
  for (const Bound& b : bounds) {
    const double e = rms_error(b.t, x);
    EXPECT_LT(e, b.max_rel) << dtype_name(b.t);
    EXPECT_GT(e, 0.0) << dtype_name(b.t);
  }
  // More bits, less error, within each family.
  EXPECT_LT(rms_error(DType::Q5_0, x), rms_error(DType::Q4_0, x));
  EXPECT_LT(rms_error(DType::Q3_K, x), rms_error(DType::Q2_K, x));
  EXPECT_LT(rms_error(DType::Q4_K, x), rms_error(DType::Q3_K, x));
  EXPECT_LT(rms_error(DType::Q5_K, x), rms_error(DType::Q4_K, x));
  EXPECT_LT(rms_error(DType::Q6_K, x), rms_error(DType::Q5_K, x));
  // The non-linear levels fit Gaussian weights better than q4_0's evenly spaced ones.
  EXPECT_LT(rms_error(DType::IQ4_NL, x), rms_error(DType::Q4_0, x));
}

TEST(QuantRoundTrip, ZerosStayZeroAndTheExtremeIsExactForSymmetricTypes) {
  std::vector<float> zeros(256, 0.0f);
  for (DType t : kAllDTypes) {
    if (!dtype_is_quantized(t)) continue;
    EXPECT_EQ(rms_error(t, zeros), 0.0) << dtype_name(t);
  }
  // q4_0 / q5_0 put the largest-magnitude value (with its sign) exactly on level -8 / -16.
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = 0.1f * (i - 10);
  x[7] = -4.0f;  // exactly representable scale 0.5 / 0.25 in fp16
  for (DType t : {DType::Q4_0, DType::Q5_0}) {
    std::vector<uint8_t> q(row_bytes(t, 32));
    convert_from_f32(x.data(), t, q.data(), 32);
    std::vector<float> y(32);
    convert_to_f32(t, q.data(), y.data(), 32);
    EXPECT_EQ(y[7], -4.0f) << dtype_name(t);
  }
  // q4_1 / q5_1 reproduce min and max of a block (d = (max - min) / levels, m = min).
  std::vector<float> r(32);
  for (int i = 0; i < 32; ++i) r[i] = -1.0f + 3.0f * i / 31.0f;
  for (DType t : {DType::Q4_1, DType::Q5_1}) {
    std::vector<uint8_t> q(row_bytes(t, 32));
    convert_from_f32(r.data(), t, q.data(), 32);
    std::vector<float> y(32);
    convert_to_f32(t, q.data(), y.data(), 32);
    EXPECT_NEAR(y[0], -1.0f, 1e-3) << dtype_name(t);
    EXPECT_NEAR(y[31], 2.0f, 2e-3) << dtype_name(t);
  }
}

// The iq4 quantisers against checks written here (tools outside the tests found them byte-
// identical to ggml's): every value sits on the level nearest to it for its (sub-)block's scale, and for iq4_nl the
// chosen scale's weighted (x^2) error is no worse than that of the plain scale putting the largest value on level -127.
TEST(QuantRoundTrip, IQ4ValuesSitOnTheirNearestLevelAndTheScaleBeatsThePlainOne) {
  const auto x = gaussian(256 * 8, 17, 1.0f);
  for (DType t : {DType::IQ4_NL, DType::IQ4_XS}) {
    std::vector<uint8_t> q(row_bytes(t, 256 * 8));
    convert_from_f32(x.data(), t, q.data(), 256 * 8);
    std::vector<float> y(x.size());
    convert_to_f32(t, q.data(), y.data(), 256 * 8);
    for (int64_t blk = 0; blk < 256 * 8 / 32; ++blk) {
      // The scale as decoded: the ratio of any value to its level.
      const float* xb = x.data() + 32 * blk;
      const float* yb = y.data() + 32 * blk;
      float scale = 0;
      for (int lv : kLevels) {
        if (yb[0] != 0) scale = yb[0] / static_cast<float>(lv);
        bool all = scale != 0;
        for (int i = 0; i < 32 && all; ++i) {
          bool found = false;
          for (int l : kLevels) found = found || yb[i] == scale * static_cast<float>(l);
          all = found;
        }
        if (all) break;
        scale = 0;
      }
      ASSERT_NE(scale, 0.0f) << dtype_name(t) << " block " << blk;
      for (int i = 0; i < 32; ++i) {
        for (int l : kLevels) {
          // Levels are picked against the scale before its fp16 rounding (as ggml does), so a
          // value near the midpoint of two levels may sit on the one that rounding made farther.
          const float slack = std::fabs(scale) * 127.0f / 1024.0f;
          EXPECT_LE(std::fabs(xb[i] - yb[i]), std::fabs(xb[i] - scale * static_cast<float>(l)) + slack)
              << dtype_name(t) << " block " << blk << " value " << i;
        }
      }
      if (t != DType::IQ4_NL) continue;
      auto err = [&](float s) {  // weighted error with nearest levels for scale s
        double e = 0;
        for (int i = 0; i < 32; ++i) {
          double best = 1e30;
          for (int l : kLevels) best = std::min(best, std::fabs(double(xb[i]) - double(s) * l));
          e += double(xb[i]) * xb[i] * best * best;
        }
        return e;
      };
      float amax = 0, max = 0;
      for (int i = 0; i < 32; ++i) {
        if (std::fabs(xb[i]) > amax) {
          amax = std::fabs(xb[i]);
          max = xb[i];
        }
      }
      // The search starts from the scale that puts the largest value exactly on level -127 and
      // only keeps improvements, so it can never end worse (up to the fp16 rounding of d).
      EXPECT_LE(err(scale), err(-max / 127.0f) * 1.01 + 1e-12) << "block " << blk;
    }
  }
}

TEST(QuantRoundTrip, KQuantsHandleOffsetAndMixedScaleBlocks) {
  // Sub-blocks of very different magnitude and an all-positive (offset) region: every value must
  // come back within half a quantisation step of its own sub-block (plus the scale rounding).
  std::vector<float> x(512);
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int i = 0; i < 512; ++i) {
    const float mag = (i / 32) % 3 == 0 ? 10.0f : ((i / 32) % 3 == 1 ? 0.01f : 1.0f);
    x[i] = mag * u(rng) + (i >= 256 && i < 320 ? 5.0f : 0.0f);
  }
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    std::vector<uint8_t> q(row_bytes(t, 512));
    convert_from_f32(x.data(), t, q.data(), 512);
    std::vector<float> y(512);
    convert_to_f32(t, q.data(), y.data(), 512);
    const double bits = t == DType::Q2_K ? 2 : t == DType::Q3_K ? 3 : t == DType::Q4_K ? 4 : t == DType::Q5_K ? 5 : 6;
    for (int blk = 0; blk < 2; ++blk) {
      float amax = 0;
      for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(x[256 * blk + i]));
      // Worst case: the largest range in the super-block spread over 2^bits levels, one step.
      const double step = 2.0 * amax / (std::pow(2.0, bits) - 1);
      for (int i = 0; i < 256; ++i)
        EXPECT_LE(std::fabs(y[256 * blk + i] - x[256 * blk + i]), step) << dtype_name(t) << " " << i;
    }
  }
}

}  // namespace
}  // namespace kvslim
