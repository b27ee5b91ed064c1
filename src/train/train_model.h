// A trainable llama-architecture model: the forward of src/model/forward.cpp (RMSNorm, RoPE in
// llama's adjacent-pair convention, causal GQA attention, SwiGLU, tied or untied output) over a
// packed batch of sequences, keeping what the backward needs, and the backward itself.
//
// Parameters live in one flat buffer (so AdamW and clipping run over one array) with named views
// whose names are the GGUF tensor names of the exported model. Gradients use the same layout.
//
// Threads: every op splits its rows (or its (sequence, KV head) pairs) across the ThreadPool and
// calls OpenBLAS single-threaded inside. One level of threading: OpenBLAS's own threads on top
// would oversubscribe the 2 cores, and the split by rows makes a step's result depend only on
// the pool size, never on scheduling.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/config.h"
#include "train/grad_ops.h"
#include "util/thread_pool.h"

namespace kvslim::train {

struct ParamTensor {
  std::string name;  // GGUF tensor name, e.g. "blk.0.attn_q.weight"
  int64_t offset = 0;
  int64_t rows = 1, cols = 0;  // a vector is one row
  bool decay = false;          // weight decay applies: every matrix except the embedding
  int64_t size() const { return rows * cols; }
};

// Names, shapes and offsets of every parameter of a llama model (llama arch: no biases, no
// q/k norms; n_rot = head_dim).
class ParamLayout {
 public:
  ParamLayout(const ModelConfig& config, bool tied_output);

  struct Layer {
    int64_t attn_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down;  // offsets
  };

  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  const ParamTensor& find(std::string_view name) const;  // throws naming the missing tensor
  int64_t size() const { return size_; }
  int64_t token_embd() const { return token_embd_; }
  int64_t output_norm() const { return output_norm_; }
  int64_t output() const { return output_; }  // == token_embd() when tied
  const std::vector<Layer>& layers() const { return layers_; }

 private:
  int64_t add(std::string name, int64_t rows, int64_t cols, bool decay);
  std::vector<ParamTensor> tensors_;
  int64_t size_ = 0;
  int64_t token_embd_ = 0, output_norm_ = 0, output_ = 0;
  std::vector<Layer> layers_;
};

// One training sequence: the model reads tokens[0 .. n-2] and predicts tokens[1 .. n-1];
// weights[t] (t >= 1) weighs the loss of predicting tokens[t] (weights[0] is unused).
struct TrainSequence {
  std::vector<int32_t> tokens;
  std::vector<float> weights;
};

// Validates a config for training: llama arch, positive sizes, heads dividing dim and KV
// heads dividing heads, even head size; sets head_dim and n_rot from dim / heads.
ModelConfig training_config(ModelConfig config);

template <class T>
class TrainModel {
 public:
  TrainModel(const ModelConfig& config, bool tied_output);

  const ModelConfig& config() const { return config_; }
  bool tied_output() const { return tied_; }
  const ParamLayout& layout() const { return layout_; }
  std::vector<T>& params() { return params_; }
  const std::vector<T>& params() const { return params_; }
  std::vector<T>& grads() { return grads_; }
  const std::vector<T>& grads() const { return grads_; }

  // GPT-2 style: matrices ~ N(0, 0.02), the two projections into the residual stream
  // (attn_output, ffn_down) scaled by 1/sqrt(2 * layers), norm weights 1. Each tensor draws
  // from its own generator seeded by (seed, tensor index).
  void init_params(uint64_t seed);
  void zero_grads();

  // Runs the batch through the model up to the logits, [sum(n_s - 1)][n_vocab], keeping the
  // activations. Throws for a sequence shorter than 2, longer than context_length + 1, with a
  // token outside the vocabulary or a weights size that differs from its tokens.
  const std::vector<T>& forward_logits(const std::vector<TrainSequence>& batch, ThreadPool& pool);
  // forward_logits, then the cross-entropy: returns sum over predicted tokens of weight * nll.
  double forward(const std::vector<TrainSequence>& batch, ThreadPool& pool);
  // Adds the gradient of scale * (the last forward()'s return value) to grads().
  void backward(T scale, ThreadPool& pool);

  // Per predicted token of the last forward(), in batch order: its loss weight and its nll.
  const std::vector<float>& token_weights() const { return weights_; }
  const std::vector<double>& token_nll() const { return nll_; }

 private:
  struct LayerActivations {
    std::vector<T> x, rstd1, xn1, q, k, v, att, x_mid, rstd2, xn2, gate, up, h;
  };
  void resize_activations(int64_t n);
  void attention_block(int l, ThreadPool& pool);
  void ffn_block(int l, ThreadPool& pool);
  void attention_block_backward(int l, ThreadPool& pool);
  void ffn_block_backward(int l, ThreadPool& pool);

  ModelConfig config_;
  bool tied_;
  ParamLayout layout_;
  RopeTable<T> rope_;
  AttentionShape shape_;
  std::vector<T> params_, grads_;

  // The batch of the last forward.
  int64_t n_ = 0;  // rows (predicted tokens)
  std::vector<int32_t> inputs_, targets_, positions_;
  std::vector<float> weights_;
  std::vector<double> nll_;
  std::vector<int64_t> seq_starts_;
  bool have_probs_ = false;

  // Activations: per layer, then the final norm and the logits (probabilities after forward()).
  std::vector<LayerActivations> acts_;
  std::vector<T> x_final_, rstd_final_, xn_final_, logits_;
  // Gradient scratch, [n][width].
  std::vector<T> dx_, dxn_, datt_, dq_, dk_, dv_, dh_, dgate_, dup_;
};

}  // namespace kvslim::train
