#include "kv/attention.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "tensor/ops.h"

namespace kvslim {

namespace {

// One query against all visible keys: dot products, softmax, weighted sum of values.
void attend_one(const float* q, const float* keys, const float* values, int64_t n_visible, int head_dim,
                float scale, float* out, float* scores) {
  for (int64_t j = 0; j < n_visible; ++j) scores[j] = dot(q, keys + j * head_dim, head_dim) * scale;
  softmax_inplace(scores, n_visible);
  std::fill(out, out + head_dim, 0.0f);
  for (int64_t j = 0; j < n_visible; ++j) axpy(scores[j], values + j * head_dim, out, head_dim);
}

}  // namespace

void attend_causal(const float* q, int64_t q_stride, int64_t n_q, const float* keys, const float* values,
                   int64_t n_keys, int head_dim, float* out, int64_t out_stride, AttentionScratch& scratch) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const int64_t n_before = n_keys - n_q;  // keys every query sees
  const int64_t tile = std::min(n_q, kAttentionQueryTile);
  if (scratch.scores.size() < size_t(tile * n_keys)) scratch.scores.resize(tile * n_keys);
  float* scores = scratch.scores.data();

  if (n_q == 1) {
    attend_one(q, keys, values, n_keys, head_dim, scale, out, scores);
    return;
  }
  for (int64_t t0 = 0; t0 < n_q; t0 += tile) {
    const int64_t rows = std::min(tile, n_q - t0);
    const int64_t cols = n_before + t0 + rows;  // keys visible to the tile's last query
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, head_dim, scale, q + t0 * q_stride, q_stride,
                keys, head_dim, 0.0f, scores, cols);
    for (int64_t i = 0; i < rows; ++i) {
      float* row = scores + i * cols;
      const int64_t visible = n_before + t0 + i + 1;
      softmax_inplace(row, visible);
      std::fill(row + visible, row + cols, 0.0f);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, head_dim, cols, 1.0f, scores, cols, values,
                head_dim, 0.0f, out + t0 * out_stride, out_stride);
  }
}

}  // namespace kvslim
