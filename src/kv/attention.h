// Scaled dot-product attention of query heads over one KV head's contiguous key/value rows.
#pragma once

#include <cstdint>
#include <vector>

namespace kvslim {

// Rows of queries handled by one pair of matrix products; bounds the score buffer.
constexpr int64_t kAttentionQueryTile = 128;

struct AttentionScratch {
  std::vector<float> scores;  // grows to tile x n_keys once, then reused
};

// Keys and values are `n_keys` rows of `head_dim` floats. The `n_q` queries (row stride
// q_stride) are the last n_q tokens of those keys: query i sees keys [0, n_keys - n_q + i].
// Writes n_q rows of head_dim floats at `out` (row stride out_stride).
void attend_causal(const float* q, int64_t q_stride, int64_t n_q, const float* keys, const float* values,
                   int64_t n_keys, int head_dim, float* out, int64_t out_stride, AttentionScratch& scratch);

}  // namespace kvslim
