// Quantisers of the non-linear 4-bit types iq4_nl and iq4_xs: the math of ggml's reference
// quantiser without importance matrix (what llama-quantize does for these types), written from
// its description.
//
// Each 32-value sub-block is fitted on its own: the levels are a fixed table (kIQ4Levels), so
// only the scale is searched. Candidates put the largest-magnitude value on the table's extreme
// level -127 (and 7 neighbouring steps either way); each candidate assigns every value to its
// nearest level and is refined by weighted least squares (weights x^2, so large values are
// reproduced best); the candidate with the largest explained energy sumqx^2 / sumq2 wins.
// iq4_nl stores that scale as fp16; iq4_xs quantises its 8 sub-block scales to signed 6 bits
// against one fp16 super-block factor and re-assigns the levels against the scales as decoded.
#include <algorithm>
#include <cmath>

#include "tensor/kernels.h"

namespace kvslim::detail {
namespace {

constexpr float kTinyGroup = 1e-15f;  // a sub-block whose values are all below this is zero

// Index of the level nearest to v (ties go to the higher level).
int nearest_level(float v) {
  if (v <= kIQ4Levels[0]) return 0;
  if (v >= kIQ4Levels[15]) return 15;
  int lo = 0, hi = 15;  // kIQ4Levels[lo] < v < kIQ4Levels[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < kIQ4Levels[mid])
      hi = mid;
    else
      lo = mid;
  }
  return v - kIQ4Levels[lo] < kIQ4Levels[hi] - v ? lo : hi;
}

// Sums over one sub-block for the levels picked with inverse scale `id`: sum w q x and sum w q^2.
void fit(const float* x, const float* w, float id, uint8_t* L, float& sumqx, float& sumq2) {
  sumqx = sumq2 = 0;
  for (int j = 0; j < 32; ++j) {
    const int l = nearest_level(id * x[j]);
    if (L != nullptr) L[j] = static_cast<uint8_t>(l);
    const float q = kIQ4Levels[l];
    sumqx += w[j] * q * x[j];
    sumq2 += w[j] * q * q;
  }
}

// The best f32 scale of one 32-value sub-block (0 for an all-zero one).
float best_scale(const float* x) {
  float w[32];
  float amax = 0, max = 0;
  for (int j = 0; j < 32; ++j) {
    w[j] = x[j] * x[j];
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  if (amax < kTinyGroup) return 0;
  float sumqx, sumq2;
  fit(x, w, -static_cast<float>(kIQ4Levels[0]) / max, nullptr, sumqx, sumq2);
  float d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
  float best = d * sumqx;
  for (int step = -7; step <= 7; ++step) {
    fit(x, w, static_cast<float>(step + kIQ4Levels[0]) / max, nullptr, sumqx, sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// Levels of 32 values against scale d, packed as nibbles (value j low, j + 16 high).
void pack_levels(const float* x, float d, uint8_t* qs) {
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>(nearest_level(id * x[j]) | nearest_level(id * x[j + 16]) << 4);
  }
}

}  // namespace

void quantize_row_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQ4Block) {
    const float d = best_scale(x);
    y[b].d = fp32_to_fp16(d);
    pack_levels(x, d, y[b].qs);
  }
}

void quantize_row_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK) {
    BlockIQ4_XS& blk = y[b];
    float scales[8];
    float amax = 0, max = 0;  // the sub-block scale of largest magnitude, with its sign
    for (int j = 0; j < 8; ++j) {
      scales[j] = best_scale(x + 32 * j);
      if (std::fabs(scales[j]) > amax) {
        amax = std::fabs(scales[j]);
        max = scales[j];
      }
    }
    const float d = -max / 32;  // the largest scale becomes the 6-bit level -32
    blk.d = fp32_to_fp16(d);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    blk.scales_h = 0;
    for (int j = 0; j < 8; ++j) {
      const int l = std::clamp(static_cast<int>(std::nearbyint(id * scales[j])), -32, 31);
      pack_levels(x + 32 * j, d * static_cast<float>(l), blk.qs + 16 * j);
      const int stored = l + 32;
      if (j % 2 == 0)
        blk.scales_l[j / 2] = static_cast<uint8_t>(stored & 0xF);
      else
        blk.scales_l[j / 2] |= static_cast<uint8_t>((stored & 0xF) << 4);
      blk.scales_h |= static_cast<uint16_t>((stored >> 4) << (2 * j));
    }
  }
}

}  // namespace kvslim::detail
