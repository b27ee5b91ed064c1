// The mxfp4 quantiser: ggml's reference quantiser (what llama-quantize does for mxfp4), written
// from its description, so that it gives the same bytes on the same input.
//
// Per 32-value block: the shared exponent puts the largest magnitude amax in the top binade of
// the e2m1 grid, e = floor(log2(amax)) - 2 + 127 (the largest e2m1 value 6 = 1.5 * 2^2, so
// amax / 2^(e - 127) lies in [4, 8) and values above 6 saturate to +-6); an all-zero block gets
// e = 0. Each value then takes the code whose level (kMXFP4Levels times the halved scale
// 2^(e - 128), in f32) is nearest, the first code on ties (so 0 is +0, never the -0 of code 8).
#include <cmath>

#include "tensor/kernels.h"

namespace kvslim::detail {
namespace {

uint8_t nearest_code(float x, float d) {
  int best = 0;
  float best_err = std::fabs(static_cast<float>(kMXFP4Levels[0]) * d - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(kMXFP4Levels[i]) * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(best);
}

// The block exponent for the largest magnitude amax. Below 2^-125 ggml's unsigned conversion of a
// negative number is undefined; the smallest exponent 0 is kept there (the block is then coded
// against the scale 2^-128, the finest there is).
uint8_t block_exponent(float amax) {
  if (!(amax > 0.0f)) return 0;
  const float e = std::floor(std::log2(amax)) - 2.0f + 127.0f;
  if (e <= 0.0f) return 0;
  if (e >= 254.0f) return 254;
  return static_cast<uint8_t>(e);
}

}  // namespace

void quantize_row_mxfp4(const float* x, BlockMXFP4* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQ4Block) {
    float amax = 0.0f;
    for (int j = 0; j < kQ4Block; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    y[b].e = block_exponent(amax);
    const float d = e8m0_to_fp32_half(y[b].e);
    for (int j = 0; j < 16; ++j)
      y[b].qs[j] = static_cast<uint8_t>(nearest_code(x[j], d) | (nearest_code(x[j + 16], d) << 4));
  }
}

}  // namespace kvslim::detail
