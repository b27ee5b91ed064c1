// Dequantisation of the block types q4_0 .. q6_k, iq4_nl, iq4_xs and mxfp4 to f32, exactly per the layouts in
// quant_blocks.h (value = scale * q [- min], computed in f32 as ggml does).
#include <cstring>

#include "tensor/kernels.h"
#include "util/error.h"

namespace kvslim::detail {
namespace {

// qh of the 5-bit legacy types as one little-endian word.
inline uint32_t load_qh(const uint8_t* qh) {
  uint32_t v;
  std::memcpy(&v, qh, 4);
  return v;
}

void dequant_q4_0(const BlockQ4_0* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kQ4Block) {
    const float d = fp16_to_fp32(x[b].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * static_cast<float>((x[b].qs[j] & 0xF) - 8);
      y[j + 16] = d * static_cast<float>((x[b].qs[j] >> 4) - 8);
    }
  }
}

void dequant_q4_1(const BlockQ4_1* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kQ4Block) {
    const float d = fp16_to_fp32(x[b].d), m = fp16_to_fp32(x[b].m);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * static_cast<float>(x[b].qs[j] & 0xF) + m;
      y[j + 16] = d * static_cast<float>(x[b].qs[j] >> 4) + m;
    }
  }
}

void dequant_q5_0(const BlockQ5_0* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kQ4Block) {
    const float d = fp16_to_fp32(x[b].d);
    const uint32_t qh = load_qh(x[b].qh);
    for (int j = 0; j < 16; ++j) {
      const int lo = static_cast<int>((x[b].qs[j] & 0xF) | (((qh >> j) & 1u) << 4));
      const int hi = static_cast<int>((x[b].qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4));
      y[j] = d * static_cast<float>(lo - 16);
      y[j + 16] = d * static_cast<float>(hi - 16);
    }
  }
}

void dequant_q5_1(const BlockQ5_1* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kQ4Block) {
    const float d = fp16_to_fp32(x[b].d), m = fp16_to_fp32(x[b].m);
    const uint32_t qh = load_qh(x[b].qh);
    for (int j = 0; j < 16; ++j) {
      const uint32_t lo = (x[b].qs[j] & 0xFu) | (((qh >> j) & 1u) << 4);
      const uint32_t hi = (x[b].qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4);
      y[j] = d * static_cast<float>(lo) + m;
      y[j + 16] = d * static_cast<float>(hi) + m;
    }
  }
}

// The K-quants with 16-value sub-blocks loop per 128-value half and 32-value quarter (bit pair k)
// so the inner loops are straight byte operations the compiler vectorises (prefill dequantises
// whole weight tiles through these).
void dequant_q2_k(const BlockQ2_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kQK) {
    const float d = fp16_to_fp32(x[b].d), dmin = fp16_to_fp32(x[b].dmin);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* q = x[b].qs + 32 * h;
      for (int k = 0; k < 4; ++k) {
        float* out = y + 128 * h + 32 * k;
        for (int half = 0; half < 2; ++half) {
          const uint8_t sm = x[b].scales[8 * h + 2 * k + half];
          const float dl = d * static_cast<float>(sm & 0xF), ml = dmin * static_cast<float>(sm >> 4);
          for (int l = 16 * half; l < 16 * half + 16; ++l) out[l] = dl * static_cast<float>((q[l] >> (2 * k)) & 3) - ml;
        }
      }
    }
  }
}

void dequant_q3_k(const BlockQ3_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kQK) {
    const float d = fp16_to_fp32(x[b].d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* q = x[b].qs + 32 * h;
      for (int k = 0; k < 4; ++k) {
        const int c = 4 * h + k;  // 32-value chunk: its high bits are bit c of hmask
        float* out = y + 32 * c;
        for (int half = 0; half < 2; ++half) {
          const float dl = d * static_cast<float>(q3k_scale(x[b].scales, 2 * c + half) - 32);
          for (int l = 16 * half; l < 16 * half + 16; ++l) {
            const int lo = (q[l] >> (2 * k)) & 3;
            const int high = (x[b].hmask[l] >> c) & 1;
            out[l] = dl * static_cast<float>((lo | (high << 2)) - 4);
          }
        }
      }
    }
  }
}

template <bool kFive, class Block>
void dequant_q45_k(const Block* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kQK) {
    const float d = fp16_to_fp32(x[b].d), dmin = fp16_to_fp32(x[b].dmin);
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      k4_scale_min(x[b].scales, j, sc, m);
      const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(m);
      const uint8_t* q = x[b].qs + 32 * (j / 2);
      for (int l = 0; l < 32; ++l) {
        int v = (j & 1) ? (q[l] >> 4) : (q[l] & 0xF);
        if constexpr (kFive) v |= ((x[b].qh[l] >> j) & 1) << 4;
        y[32 * j + l] = dl * static_cast<float>(v) - ml;
      }
    }
  }
}

void dequant_q6_k(const BlockQ6_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kQK) {
    const float d = fp16_to_fp32(x[b].d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x[b].ql + 64 * h;
      const uint8_t* qh = x[b].qh + 32 * h;
      for (int k = 0; k < 4; ++k) {
        float* out = y + 128 * h + 32 * k;
        const uint8_t* lq = ql + 32 * (k & 1);
        const int lshift = k < 2 ? 0 : 4;
        for (int half = 0; half < 2; ++half) {
          const float dl = d * static_cast<float>(x[b].scales[8 * h + 2 * k + half]);
          for (int l = 16 * half; l < 16 * half + 16; ++l) {
            const int q = ((lq[l] >> lshift) & 0xF) | (((qh[l] >> (2 * k)) & 3) << 4);
            out[l] = dl * static_cast<float>(q - 32);
          }
        }
      }
    }
  }
}

// iq4_nl, each 32-value sub-block of iq4_xs and mxfp4: scale * level of each nibble, from the
// type's level table.
void dequant_table_32(const int8_t* levels, const uint8_t* qs, float scale, float* y) {
  for (int j = 0; j < 16; ++j) {
    y[j] = scale * static_cast<float>(levels[qs[j] & 0xF]);
    y[j + 16] = scale * static_cast<float>(levels[qs[j] >> 4]);
  }
}

void dequant_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kQ4Block) dequant_table_32(kIQ4Levels, x[b].qs, fp16_to_fp32(x[b].d), y);
}

void dequant_mxfp4(const BlockMXFP4* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kQ4Block) dequant_table_32(kMXFP4Levels, x[b].qs, e8m0_to_fp32_half(x[b].e), y);
}

void dequant_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = fp16_to_fp32(x[b].d);
    for (int j = 0; j < 8; ++j, y += 32)
      dequant_table_32(kIQ4Levels, x[b].qs + 16 * j, d * static_cast<float>(iq4xs_scale(x[b], j)), y);
  }
}

}  // namespace

void dequantize_row_blocks(DType type, const void* x, float* y, int64_t n) {
  const int64_t nb = n / dtype_block_size(type);
  switch (type) {
    case DType::Q4_0: dequant_q4_0(static_cast<const BlockQ4_0*>(x), y, nb); return;
    case DType::Q4_1: dequant_q4_1(static_cast<const BlockQ4_1*>(x), y, nb); return;
    case DType::Q5_0: dequant_q5_0(static_cast<const BlockQ5_0*>(x), y, nb); return;
    case DType::Q5_1: dequant_q5_1(static_cast<const BlockQ5_1*>(x), y, nb); return;
    case DType::Q2_K: dequant_q2_k(static_cast<const BlockQ2_K*>(x), y, nb); return;
    case DType::Q3_K: dequant_q3_k(static_cast<const BlockQ3_K*>(x), y, nb); return;
    case DType::Q4_K: dequant_q45_k<false>(static_cast<const BlockQ4_K*>(x), y, nb); return;
    case DType::Q5_K: dequant_q45_k<true>(static_cast<const BlockQ5_K*>(x), y, nb); return;
    case DType::Q6_K: dequant_q6_k(static_cast<const BlockQ6_K*>(x), y, nb); return;
    case DType::IQ4_NL: dequant_iq4_nl(static_cast<const BlockIQ4_NL*>(x), y, nb); return;
    case DType::IQ4_XS: dequant_iq4_xs(static_cast<const BlockIQ4_XS*>(x), y, nb); return;
    case DType::MXFP4: dequant_mxfp4(static_cast<const BlockMXFP4*>(x), y, nb); return;
    default: break;
  }
  fail("dequantize_row_blocks: {} is not a block type", dtype_name(type));
}

}  // namespace kvslim::detail
