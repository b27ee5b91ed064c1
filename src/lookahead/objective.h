// LookaheadKV's training objective (LookaheadKV §3.2; docs/methods.md, "LookaheadKV: learned
// lookahead rows") and its gradient. For one prompt, per (layer, query head): the ground truth
// is the mean attention of the model's own response queries on the prompt tokens, the
// prediction the summed attention of the m lookahead queries on them (no pooling); both
// normalised to sum 1 over the prompt, the loss is the mean over layers and heads of
// KL(truth || prediction).
//
// The prompt is frozen and attention is causal, so the prompt's KV is a constant here: only the
// m lookahead rows run forward (attending to the prompt KV and to earlier lookahead rows, at
// positions n .. n+m-1, with their LoRA) and backward, through the frozen base weights into the
// lookahead embeddings and the LoRA matrices. That costs about m/n of a whole backward pass.
// Nothing after the last layer's attention reaches the loss, so that is where the rows stop.
#pragma once

#include <cstdint>
#include <vector>

#include "lookahead/frozen_model.h"
#include "util/thread_pool.h"

namespace kvslim {

// What one training prompt gives the objective.
template <class T>
struct PromptTarget {
  int64_t n = 0;                // prompt tokens
  std::vector<T> keys, values;  // the base model's prompt KV, [layer][kv head][n][head dim] (keys after RoPE)
  std::vector<T> importance;    // ground truth, [layer][query head][n], each row summing to 1
};

// KL(truth || w / sum(w)) over n entries (truth >= 0, w > 0); with d_w, writes dKL/dw there.
template <class T>
double kl_to_normalized(const T* truth, const T* w, int64_t n, T* d_w);

template <class T>
class LookaheadObjective {
 public:
  // Parameters are one buffer: the lookahead embeddings [m][dim], then the LoRA in `lora`'s layout.
  LookaheadObjective(const FrozenModel<T>& base, int n_lookahead, const LoraLayout& lora, T lora_scale);

  int64_t n_params() const { return embd_size() + lora_.size(); }
  int64_t embd_size() const { return int64_t(m_) * base_.config.dim; }

  // The loss for one prompt; with grads (n_params entries), adds its gradient there.
  double evaluate(const T* params, const PromptTarget<T>& target, T* grads, ThreadPool& pool);

  // After evaluate: the lookahead queries' attention on each prompt token summed over the
  // queries, for (layer, query head): the prediction before normalisation.
  const T* prompt_attention(int layer, int q_head) const;

 private:
  struct LayerActs {
    std::vector<T> x, rstd1, xn1, q_pre, k_pre, q_rstd, k_rstd, q, k, v, kv_keys, kv_values, probs, att;
    std::vector<T> x_mid, rstd2, xn2, gate, up, h;
    std::vector<T> u[kLoraSites];  // x A^T of each site, [m][rank]
  };
  void forward_layer(int l, const T* params, const PromptTarget<T>& target, ThreadPool& pool);
  void project(int l, LoraSite site, const T* params, const T* x, const T* bias, T* y, ThreadPool& pool);
  void project_backward(int l, LoraSite site, const T* params, const T* x, const T* dy, T* dx, T* grads,
                        ThreadPool& pool);
  void attention_backward(int l, const std::vector<T>& d_att, const std::vector<T>& d_sums, std::vector<T>& dq,
                          std::vector<T>& dk, std::vector<T>& dv, ThreadPool& pool);

  const FrozenModel<T>& base_;
  int m_;
  LoraLayout lora_;
  T scale_;
  int64_t n_ = 0;  // prompt tokens of the last evaluate
  std::vector<LayerActs> acts_;
  std::vector<T> sums_;  // [layer][q head][n]
};

}  // namespace kvslim
