// A loaded model: config, weights (views into the GGUF file's bytes, read into memory or mapped
// as weight_residency decides, in their stored type) and tokenizer. Immutable after loading, so
// sessions on several threads can share it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/config.h"
#include "model/moe_weights.h"
#include "tensor/dtype.h"
#include "tokenizer/tokenizer.h"

namespace kvslim {

struct LayerWeights {
  std::vector<float> attn_norm;                      // dim
  WeightView wq, wk, wv, wo;                         // q_dim x dim, kv_dim x dim, kv_dim x dim, dim x q_dim
  std::vector<float> bq, bk, bv;                     // qwen2, gpt-oss (q_dim, kv_dim, kv_dim)
  std::vector<float> bo;                             // gpt-oss (dim): attn_output.bias
  std::vector<float> attn_sinks;                     // gpt-oss (n_heads): one sink logit per query head
  std::vector<float> q_norm, k_norm;                 // qwen3, gemma3 (head_dim each)
  std::vector<float> post_attn_norm, post_ffn_norm;  // gemma3 only (dim each): norms of the block outputs
  std::vector<float> ffn_norm;                       // dim (gpt-oss: post_attention_norm.weight)
  WeightView w_gate, w_up, w_down;                   // ffn x dim, ffn x dim, dim x ffn
  MoeWeights moe;                                    // mixture-of-experts models instead of w_gate/up/down
};

class Model {
 public:
  // Loads a GGUF model; every tensor's presence, shape and type is checked, and errors name it.
  // Its bytes are read into memory or mapped as weight_residency(file size) decides.
  static std::unique_ptr<Model> load(const std::string& path);

  const ModelConfig& config() const { return config_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const gguf::File& file() const { return file_; }
  const std::vector<LayerWeights>& layers() const { return layers_; }
  const WeightView& token_embedding() const { return token_embd_; }
  const WeightView& output() const { return output_; }  // token_embd when tied
  bool output_is_tied() const { return output_tied_; }
  const std::vector<float>& output_norm() const { return output_norm_; }
  const std::vector<float>& rope_freq_factors() const { return rope_freqs_; }  // empty: none
  // The RoPE frequency factors for a context of n_ctx tokens (0: the trained context_length):
  // rope_freqs, else Phi-3's long factors beyond rope.scaling.original_context_length and the
  // short ones up to it (llama.cpp's choice by the context size); empty: none.
  const std::vector<float>& rope_factors(int64_t n_ctx) const;

  uint64_t weight_bytes() const;
  // Weight bytes one decoded token reads: attention, norms, the router and k experts of every
  // layer, one embedding row and the output matrix (weight_bytes() minus the k-of-n experts unused).
  uint64_t active_weight_bytes_per_token() const;

 private:
  explicit Model(gguf::File file) : file_(std::move(file)) {}
  gguf::File file_;
  ModelConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_;
  WeightView token_embd_, output_;
  bool output_tied_ = false;
  std::vector<float> output_norm_, rope_freqs_, rope_factors_long_, rope_factors_short_;
  std::vector<LayerWeights> layers_;
};

// The KV cache's view of a loaded model: kv_shape(config) plus its layers' attention sinks.
KvShape kv_shape(const Model& model, DType key_type = DType::F32, DType value_type = DType::F32);

}  // namespace kvslim
