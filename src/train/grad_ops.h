// The training ops: each forward next to its backward, over plain row-major arrays (llm.c
// style), so the same functions serve the full model, gradient checks and later LoRA/lookahead
// training. Templates over the scalar: float for training, double for the finite-difference
// tests. Backward functions ADD into their gradient outputs (gradients of a value used twice,
// e.g. the residual stream or a tied embedding, accumulate), unless stated otherwise.
//
// Layouts: activations are [n][width] (one row per token); a weight matrix W of a linear map
// with `in` inputs and `out` outputs is [out][in] row-major, as GGUF stores it.
#pragma once

#include <cstdint>
#include <vector>

#include "util/thread_pool.h"

namespace kvslim::train {

// C = alpha * op(A) op(B) + beta * C, row-major, through OpenBLAS (cblas_sgemm / cblas_dgemm).
template <class T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc);

// ---- embedding (ops_embedding.cpp) ----
// out[t] = table[tokens[t]]; d_table[tokens[t]] += d_out[t].
template <class T>
void embedding_forward(const T* table, const int32_t* tokens, int64_t n, int dim, T* out);
template <class T>
void embedding_backward(const T* d_out, const int32_t* tokens, int64_t n, int dim, T* d_table);

// ---- RMSNorm (ops_rmsnorm.cpp) ----
// y = x * rstd * w with rstd = 1 / sqrt(mean(x^2) + eps), saved per row for the backward.
template <class T>
void rmsnorm_forward(const T* x, const T* w, int64_t n, int dim, T eps, T* y, T* rstd, ThreadPool& pool);
// dx += d(loss)/dx, dw += d(loss)/dw.
template <class T>
void rmsnorm_backward(const T* x, const T* w, const T* rstd, const T* dy, int64_t n, int dim, T* dx, T* dw,
                      ThreadPool& pool);

// ---- linear, y = x W^T + b (ops_linear.cpp) ----
// b may be null. Threads split the tokens.
template <class T>
void linear_forward(const T* x, const T* w, const T* b, int64_t n, int in, int out, T* y, ThreadPool& pool);
// dw += dy^T x; db += column sums of dy (db may be null); dx = dy W, or dx += dy W with
// accumulate_dx (dx may be null when the input needs no gradient).
template <class T>
void linear_backward(const T* x, const T* w, const T* dy, int64_t n, int in, int out, T* dx, bool accumulate_dx, T* dw,
                     T* db, ThreadPool& pool);

// ---- RoPE, llama convention: adjacent pairs (x[2i], x[2i+1]) rotate by pos * base^(-2i/head_dim) ----
// (ops_rope.cpp). The whole head rotates (n_rot = head_dim), as the trainer's models do.
template <class T>
struct RopeTable {
  RopeTable(int head_dim, double base, int64_t max_positions);
  int head_dim;
  int64_t max_positions;
  std::vector<T> cos, sin;  // [position][head_dim / 2]
};
// x is [n][n_heads * head_dim], rotated in place; positions[t] < table.max_positions.
template <class T>
void rope_forward(T* x, int64_t n, int n_heads, const int32_t* positions, const RopeTable<T>& table);
// The rotation is orthogonal, so its backward rotates the gradient back (by -theta), in place.
template <class T>
void rope_backward(T* dx, int64_t n, int n_heads, const int32_t* positions, const RopeTable<T>& table);

// ---- causal grouped-query attention over a packed batch of sequences (ops_attention.cpp) ----
// q, out: [n][n_heads * head_dim]; k, v: [n][n_kv_heads * head_dim]; sequence s holds rows
// seq_starts[s] .. seq_starts[s + 1] - 1 (seq_starts ends with n). Query head h reads KV head
// h / (n_heads / n_kv_heads); query i of a sequence sees its keys 0..i; scores are scaled by
// 1/sqrt(head_dim). Nothing but q, k, v is saved: the backward recomputes the probabilities tile
// by tile with the same products as the forward. Threads split the (sequence, KV head) pairs.
struct AttentionShape {
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
};
template <class T>
void attention_forward(const T* q, const T* k, const T* v, const std::vector<int64_t>& seq_starts,
                       const AttentionShape& shape, T* out, ThreadPool& pool);
// dq, dk, dv are overwritten (each is wholly determined by this call).
template <class T>
void attention_backward(const T* q, const T* k, const T* v, const T* d_out, const std::vector<int64_t>& seq_starts,
                        const AttentionShape& shape, T* dq, T* dk, T* dv, ThreadPool& pool);

// ---- SwiGLU, h = silu(gate) * up (ops_swiglu.cpp) ----
template <class T>
void swiglu_forward(const T* gate, const T* up, int64_t n, T* h);
// d_gate, d_up are overwritten.
template <class T>
void swiglu_backward(const T* gate, const T* up, const T* dh, int64_t n, T* d_gate, T* d_up);

// ---- cross-entropy with per-token weights (ops_cross_entropy.cpp) ----
// Turns logits [n][vocab] into probabilities in place, writes nll[t] = -log softmax(logits_t)[targets[t]]
// and returns sum_t weights[t] * nll[t]. A token with weight 0 adds nothing (its target is
// still checked to be in the vocabulary).
template <class T>
double cross_entropy_forward(T* logits_to_probs, const int32_t* targets, const float* weights, int64_t n, int vocab,
                             double* nll, ThreadPool& pool);
// The gradient of scale * sum_t weights[t] * nll_t, written over the probabilities in place:
// d_logits[t] = scale * weights[t] * (probs[t] - onehot(targets[t])).
template <class T>
void cross_entropy_backward(T* probs_to_dlogits, const int32_t* targets, const float* weights, int64_t n, int vocab,
                            T scale, ThreadPool& pool);

}  // namespace kvslim::train
