// Scaled dot-product attention of the query heads that share one KV head over that head's
// paged tokens (a HeadCache): dense causal attention for a block of queries, and sparse
// attention of one query over a subset of the tokens. Scale 1/sqrt(head_dim). Keys and values
// are read in the head's stored types (f32, f16, bf16, q8_0) without an f32 copy of the cache.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "kv/head_cache.h"

namespace kvslim {

// Rows of queries handled by one pass of matrix products; bounds the score buffer.
constexpr int64_t kAttentionQueryTile = 128;

// Tokens of keys (or values) gathered as f32 rows for one matrix product in prefill: the pages
// that fit in 256 tokens (at least one page).
inline int64_t attention_key_chunk(int64_t page_tokens) {
  return page_tokens >= 256 ? page_tokens : 256 / page_tokens * page_tokens;
}

// Per-thread working memory. The owner sizes `scores` once (attention_scores_size) so that
// the kernels never allocate.
struct AttentionScratch {
  std::vector<float> scores;
  std::vector<float> rows;      // decoded rows: 8 rows (decode) or attention_key_chunk rows (prefill)
  std::vector<float> queries;   // prefill: one query tile, scaled
  std::vector<float> tile_out;  // prefill: that tile's outputs
};

// Floats of AttentionScratch::scores the kernels need for `n_q_heads` query heads (decode) or
// query tiles (prefill) over a KV head holding up to `capacity` tokens.
inline int64_t attention_scores_size(int n_q_heads, int64_t capacity) {
  return (n_q_heads > kAttentionQueryTile ? n_q_heads : kAttentionQueryTile) * capacity;
}

// Sees every softmax row as the dense kernel computes it.
class SoftmaxRowObserver {
 public:
  virtual ~SoftmaxRowObserver() = default;
  // Query head `g` of the group (0-based) for query `i` of the block: probabilities over the
  // head's first `n_visible` tokens.
  virtual void on_row(int g, int64_t i, const float* probs, int64_t n_visible) = 0;
};

// Where one KV head's tokens live, as the kernels read them.
struct PagedKv {
  const HeadCache& head;
  int head_dim;
  int page_tokens;
  // > 0 on a sliding-window layer: the query at position p reads only the keys at positions in
  // (p - window, p] (llama.cpp's standard SWA mask); the others get probability 0.
  int window = 0;
  // Attention sinks (gpt-oss): one learned logit per query head of the call (the n_q_heads heads
  // q holds), joining every softmax row of that head: its denominator gains exp(sink - max), no
  // value is added, so the row sums to 1 minus the sink's share. nullptr: no sinks.
  const float* sinks = nullptr;
};

// Query head g's sink logit, -inf (no effect on the softmax) without sinks.
inline float sink_logit(const PagedKv& kv, int g) {
  return kv.sinks != nullptr ? kv.sinks[g] : -std::numeric_limits<float>::infinity();
}

// The first cache index a query at `query_position` reads: 0 without a window, else the first
// token whose position is above query_position - window (positions ascend in a head).
inline int64_t first_visible(const PagedKv& kv, int64_t query_position) {
  return kv.window > 0 ? kv.head.first_after(query_position - kv.window) : 0;
}

// Dense causal attention (with kv.sinks in each softmax) of `n_q_heads` query heads (consecutive, head_dim apart in q
// and out) for a block of `n_q` queries (row strides q_stride, out_stride). The queries are the head's last n_q tokens:
// query i sees tokens [0, size - n_q + i] (from first_visible on a window layer). n_q == 1 is the decode path (every
// key row is read once for all the heads); larger blocks use matrix products page by page.
void attend_dense(const PagedKv& kv, const float* q, int64_t q_stride, int n_q_heads, int64_t n_q, float* out,
                  int64_t out_stride, AttentionScratch& scratch, SoftmaxRowObserver* observer = nullptr);

// The first pass of decode attention alone: s[g * s_stride + j] = q_g . k_j / sqrt(head_dim)
// for every token j of the head and query head g (consecutive, head_dim apart), the same
// numbers the decode kernel computes, each key row read once for all the heads. For sparse
// selectors that rank tokens by exact attention.
void attention_scores(const PagedKv& kv, const float* q, int n_q_heads, float* s, int64_t s_stride,
                      AttentionScratch& scratch);

// The same pass with the caller's scale: s[g * s_stride + j] = scale * (q_g . k_j). SparQ scores
// on a subset of channels by zeroing the others in q (a zero channel adds exact zeros).
void key_scores(const PagedKv& kv, const float* q, int n_q_heads, float scale, float* s, int64_t s_stride,
                AttentionScratch& scratch);

// What reads `kv_type` pages of `head_dim` in attention at the active level (kvslim info --system).
const char* attention_kernel(DType kv_type, int head_dim);

// One query per head (n_q_heads consecutive heads, head_dim apart) attending over only the
// tokens at `indices` (ascending cache indices): softmax over that subset (and the head's sink).
// An empty subset gives zeros.
void attend_sparse(const PagedKv& kv, std::span<const int32_t> indices, const float* q, int n_q_heads, float* out,
                   AttentionScratch& scratch);

}  // namespace kvslim
