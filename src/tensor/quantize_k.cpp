// K-quant quantisers: the math of ggml's reference quantisers without importance matrix
// (llama-quantize's default path), written from the algorithm descriptions.
//
// Every type works in two steps:
//   1. fit each sub-block on its own: an f32 scale (and, for q2_K/q4_K/q5_K, a min) that
//      minimises a weighted squared (or absolute) reconstruction error, found by a short search
//      over candidate scales, each refined by weighted least squares;
//   2. quantise the sub-block scales (and mins) to 4/6/8 bits against the super-block's largest
//      one, store that as fp16, then re-quantise every value against the scale it will really be
//      decoded with.
// Sums are kept in f32 in the same order as ggml so the chosen levels (and the error) match.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/kernels.h"

namespace kvslim::detail {
namespace {

// Rounds half to even (as ggml's nearest_int, which uses the fp32 adder's rounding).
inline int nearest(float v) { return static_cast<int>(std::nearbyint(v)); }

// Below this magnitude a sub-block counts as all zeros.
constexpr float kTinyGroup = 1e-15f;

// Affine fit of x[0, n) to levels L in [0, nmax]: x ~ scale * L - min_out (min_out >= 0, i.e. the
// offset is never positive, so zero stays representable). Starts from the plain [min, max] grid,
// then tries nstep + 1 grid densities iscale = (nmax + rmin + rdelta * k) / (max - offset); for each,
// the levels are fixed and (scale, offset) solved by weighted least squares; the candidate with
// the least weighted error (|err| when abs_error, else err^2) wins. Returns the scale.
float fit_affine(int n, int nmax, const float* x, const float* w, uint8_t* L, float& min_out, float rmin, float rdelta,
                 int nstep, bool abs_error) {
  float lo = x[0], hi = x[0];
  float sum_w = w[0], sum_x = w[0] * x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (lo > 0) lo = 0;
  if (hi == lo) {
    std::fill(L, L + n, uint8_t{0});
    min_out = -lo;
    return 0.0f;
  }
  auto error_of = [&](float scale, float offset, const uint8_t* levels) {
    float e = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = scale * levels[i] + offset - x[i];
      e += w[i] * (abs_error ? std::fabs(diff) : diff * diff);
    }
    return e;
  };
  float iscale = nmax / (hi - lo);
  float scale = 1 / iscale;
  float offset = lo;
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(std::clamp(nearest(iscale * (x[i] - lo)), 0, nmax));
  float best = error_of(scale, offset, L);
  uint8_t trial[32];
  // Note: once a candidate wins, later grids are anchored at its (fitted) offset, not at lo.
  for (int k = 0; k <= nstep; ++k) {
    iscale = (rmin + rdelta * k + nmax) / (hi - offset);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest(iscale * (x[i] - offset)), 0, nmax);
      trial[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0)) continue;
    float s = (sum_w * sum_xl - sum_x * sum_l) / det;
    float o = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (o > 0) {  // a positive offset is not representable: fit the scale alone through zero
      o = 0;
      s = sum_xl / sum_l2;
    }
    const float e = error_of(s, o, trial);
    if (e < best) {
      std::copy(trial, trial + n, L);
      best = e;
      scale = s;
      offset = o;
    }
  }
  min_out = -offset;
  return scale;
}

// Symmetric fit for q6_K's 16-value sub-blocks: levels l in [-nmax, nmax - 1] (stored + nmax),
// weights x^2. The grid is anchored so the largest-magnitude value maps to -nmax exactly; 19
// densities (nmax + 0.1 k) / -max, k = -9..9, are tried and the one whose least-squares scale
// explains the most weighted energy (sumlx^2 / suml2) wins. Returns that scale.
float fit_symmetric(int n, int nmax, const float* x, int8_t* L) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < kTinyGroup) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  auto fit = [&](float iscale, float& sumlx, float& suml2, int8_t* out) {
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest(iscale * x[i]), -nmax, nmax - 1);
      if (out != nullptr) out[i] = static_cast<int8_t>(l + nmax);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
  };
  float sumlx, suml2;
  fit(-nmax / max, sumlx, suml2, L);
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int k = -9; k <= 9; ++k) {
    if (k == 0) continue;
    const float iscale = -(nmax + 0.1f * k) / max;
    fit(iscale, sumlx, suml2, nullptr);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      fit(iscale, sumlx, suml2, L);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Symmetric fit for q3_K's sub-blocks, levels l in [-nmax, nmax - 1] (stored + nmax), weights x^2:
// start from the grid anchored at the signed maximum, then up to 5 passes of coordinate descent,
// moving each level to its best value given the others' least-squares scale whenever that
// raises sumlx^2 / suml2. Returns the least-squares scale.
float fit_symmetric_descent(int n, int nmax, const float* x, int8_t* L) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < kTinyGroup) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  const float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(nearest(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * L[i];
      if (!(slx > 0)) continue;
      float sl2 = suml2 - w * L[i] * L[i];
      const int l = std::clamp(nearest(x[i] * sl2 / slx), -nmax, nmax - 1);
      if (l == L[i]) continue;
      slx += w * x[i] * l;
      sl2 += w * l * l;
      if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
        L[i] = static_cast<int8_t>(l);
        sumlx = slx;
        suml2 = sl2;
        ++changed;
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return sumlx / suml2;
}

// Packs 2-bit levels L[0, 256) as q2_K / q3_K's qs: per 128-value half, byte l holds values
// l, l + 32, l + 64, l + 96 in bit pairs 0, 2, 4, 6.
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* s = L + 128 * h;
    for (int l = 0; l < 32; ++l) {
      qs[32 * h + l] = static_cast<uint8_t>(s[l] | (s[l + 32] << 2) | (s[l + 64] << 4) | (s[l + 96] << 6));
    }
  }
}

// q4_K / q5_K: 8 sub-blocks of 32 with 6-bit scales and mins. nmax = 15 or 31.
template <int kNmax>
void quantize_q45_k_block(const float* x, uint16_t& d_out, uint16_t& dmin_out, uint8_t* scales, uint8_t* L) {
  float sc[8], mn[8], w[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    // Weights: the sub-block's rms plus |x|, favouring large values without ignoring small ones.
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) w[l] = av + std::fabs(xs[l]);
    if constexpr (kNmax == 15) {
      sc[j] = fit_affine(32, kNmax, xs, w, L + 32 * j, mn[j], -1.0f, 0.1f, 20, false);
    } else {
      sc[j] = fit_affine(32, kNmax, xs, w, L + 32 * j, mn[j], -0.5f, 0.1f, 15, false);
    }
    max_scale = std::max(max_scale, sc[j]);
    max_min = std::max(max_min, mn[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  std::memset(scales, 0, 12);
  for (int j = 0; j < 8; ++j) {
    // (ggml stores these through uint8_t before the min: same here, values are >= 0)
    const int ls = std::min(63, static_cast<int>(static_cast<uint8_t>(nearest(inv_scale * sc[j]))));
    const int lm = std::min(63, static_cast<int>(static_cast<uint8_t>(nearest(inv_min * mn[j]))));
    if (j < 4) {
      scales[j] = static_cast<uint8_t>(ls);
      scales[j + 4] = static_cast<uint8_t>(lm);
    } else {
      scales[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  d_out = fp32_to_fp16(max_scale / 63.0f);
  dmin_out = fp32_to_fp16(max_min / 63.0f);
  const float d = fp16_to_fp32(d_out), dmin = fp16_to_fp32(dmin_out);
  for (int j = 0; j < 8; ++j) {
    int s, m;
    k4_scale_min(scales, j, s, m);
    const float dl = d * s;
    if (dl == 0) continue;  // keeps the fitted levels (they decode to -min either way)
    const float ml = dmin * m;
    for (int l = 0; l < 32; ++l)
      L[32 * j + l] = static_cast<uint8_t>(std::clamp(nearest((x[32 * j + l] + ml) / dl), 0, kNmax));
  }
}

}  // namespace

void quantize_row_q2_k(const float* x, BlockQ2_K* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK) {
    BlockQ2_K& blk = y[b];
    uint8_t L[kQK];
    float sc[16], mn[16], w[16];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) w[l] = std::fabs(x[16 * j + l]);
      sc[j] = fit_affine(16, 3, x + 16 * j, w, L + 16 * j, mn[j], -0.5f, 0.1f, 15, true);
      max_scale = std::max(max_scale, sc[j]);
      max_min = std::max(max_min, mn[j]);
    }
    // 4-bit scales and mins against d = max_scale / 15, dmin = max_min / 15.
    if (max_scale > 0) {
      const float iscale = 15.0f / max_scale;
      for (int j = 0; j < 16; ++j) blk.scales[j] = static_cast<uint8_t>(nearest(iscale * sc[j]));
      blk.d = fp32_to_fp16(max_scale / 15.0f);
    } else {
      std::memset(blk.scales, 0, 16);
      blk.d = fp32_to_fp16(0.0f);
    }
    if (max_min > 0) {
      const float iscale = 15.0f / max_min;
      for (int j = 0; j < 16; ++j) blk.scales[j] |= static_cast<uint8_t>(nearest(iscale * mn[j]) << 4);
      blk.dmin = fp32_to_fp16(max_min / 15.0f);
    } else {
      blk.dmin = fp32_to_fp16(0.0f);
    }
    const float d = fp16_to_fp32(blk.d), dmin = fp16_to_fp32(blk.dmin);
    for (int j = 0; j < 16; ++j) {
      const float dl = d * (blk.scales[j] & 0xF);
      if (dl == 0) continue;
      const float ml = dmin * (blk.scales[j] >> 4);
      for (int l = 0; l < 16; ++l)
        L[16 * j + l] = static_cast<uint8_t>(std::clamp(nearest((x[16 * j + l] + ml) / dl), 0, 3));
    }
    pack_2bit(L, blk.qs);
  }
}

void quantize_row_q3_k(const float* x, BlockQ3_K* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK) {
    BlockQ3_K& blk = y[b];
    int8_t L[kQK];
    float sc[16];
    float amax = 0, max_scale = 0;
    for (int j = 0; j < 16; ++j) {
      sc[j] = fit_symmetric_descent(16, 4, x + 16 * j, L + 16 * j);
      if (std::fabs(sc[j]) > amax) {
        amax = std::fabs(sc[j]);
        max_scale = sc[j];
      }
    }
    // 6-bit signed scales in [-32, 31] against d = max_scale / -32 (the largest maps to -32).
    std::memset(blk.scales, 0, 12);
    if (max_scale != 0) {
      const float iscale = -32.0f / max_scale;
      for (int j = 0; j < 16; ++j) {
        const int l = std::clamp(static_cast<int>(static_cast<int8_t>(nearest(iscale * sc[j]))), -32, 31) + 32;
        if (j < 8) {
          blk.scales[j] = static_cast<uint8_t>(l & 0xF);
        } else {
          blk.scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
        }
        blk.scales[8 + j % 4] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
      }
      blk.d = fp32_to_fp16(1 / iscale);
    } else {
      blk.d = fp32_to_fp16(0.0f);
    }
    const float d = fp16_to_fp32(blk.d);
    for (int j = 0; j < 16; ++j) {
      const float dl = d * (q3k_scale(blk.scales, j) - 32);
      if (dl == 0) continue;
      for (int l = 0; l < 16; ++l)
        L[16 * j + l] = static_cast<int8_t>(std::clamp(nearest(x[16 * j + l] / dl), -4, 3) + 4);
    }
    // High bit of value i -> bit i / 32 of hmask[i % 32]; the low 2 bits packed as q2_K.
    uint8_t low[kQK];
    std::memset(blk.hmask, 0, 32);
    for (int i = 0; i < kQK; ++i) {
      if (L[i] > 3) blk.hmask[i % 32] |= static_cast<uint8_t>(1u << (i / 32));
      low[i] = static_cast<uint8_t>(L[i] & 3);
    }
    pack_2bit(low, blk.qs);
  }
}

void quantize_row_q4_k(const float* x, BlockQ4_K* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK) {
    BlockQ4_K& blk = y[b];
    uint8_t L[kQK];
    quantize_q45_k_block<15>(x, blk.d, blk.dmin, blk.scales, L);
    for (int p = 0; p < 4; ++p) {
      for (int l = 0; l < 32; ++l) blk.qs[32 * p + l] = static_cast<uint8_t>(L[64 * p + l] | (L[64 * p + 32 + l] << 4));
    }
  }
}

void quantize_row_q5_k(const float* x, BlockQ5_K* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK) {
    BlockQ5_K& blk = y[b];
    uint8_t L[kQK];
    quantize_q45_k_block<31>(x, blk.d, blk.dmin, blk.scales, L);
    std::memset(blk.qh, 0, 32);
    for (int j = 0; j < 8; ++j) {
      for (int l = 0; l < 32; ++l) {
        if (L[32 * j + l] > 15) blk.qh[l] |= static_cast<uint8_t>(1u << j);
      }
    }
    for (int p = 0; p < 4; ++p) {
      for (int l = 0; l < 32; ++l) {
        blk.qs[32 * p + l] = static_cast<uint8_t>((L[64 * p + l] & 0xF) | ((L[64 * p + 32 + l] & 0xF) << 4));
      }
    }
  }
}

void quantize_row_q6_k(const float* x, BlockQ6_K* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK) {
    BlockQ6_K& blk = y[b];
    int8_t L[kQK];
    float sc[16];
    float amax = 0, max_scale = 0;
    for (int j = 0; j < 16; ++j) {
      sc[j] = fit_symmetric(16, 32, x + 16 * j, L + 16 * j);
      if (std::fabs(sc[j]) > amax) {
        amax = std::fabs(sc[j]);
        max_scale = sc[j];
      }
    }
    if (amax < kTinyGroup) {
      std::memset(&blk, 0, sizeof(blk));
      continue;
    }
    // 8-bit signed scales against d = max_scale / -128 (the largest maps to -128).
    const float iscale = -128.0f / max_scale;
    blk.d = fp32_to_fp16(1 / iscale);
    for (int j = 0; j < 16; ++j) blk.scales[j] = static_cast<int8_t>(std::min(127, nearest(iscale * sc[j])));
    const float d = fp16_to_fp32(blk.d);
    for (int j = 0; j < 16; ++j) {
      const float dl = d * blk.scales[j];
      if (dl == 0) continue;
      for (int l = 0; l < 16; ++l)
        L[16 * j + l] = static_cast<int8_t>(std::clamp(nearest(x[16 * j + l] / dl), -32, 31) + 32);
    }
    // Low nibbles: ql[64 h + l] = values l | l + 64 << 4, ql[64 h + 32 + l] = l + 32 | l + 96 << 4;
    // high bit pairs: qh[32 h + l] = the 4 values' top 2 bits at bits 0, 2, 4, 6.
    for (int h = 0; h < 2; ++h) {
      const int8_t* s = L + 128 * h;
      for (int l = 0; l < 32; ++l) {
        blk.ql[64 * h + l] = static_cast<uint8_t>((s[l] & 0xF) | ((s[l + 64] & 0xF) << 4));
        blk.ql[64 * h + 32 + l] = static_cast<uint8_t>((s[l + 32] & 0xF) | ((s[l + 96] & 0xF) << 4));
        blk.qh[32 * h + l] = static_cast<uint8_t>((s[l] >> 4) | ((s[l + 32] >> 4) << 2) | ((s[l + 64] >> 4) << 4) |
                                                  ((s[l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace kvslim::detail
