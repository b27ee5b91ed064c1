// One forward pass of a llama-family model over a block of consecutive tokens. The same code
// serves prefill (blocks of --batch tokens, matrix-matrix products) and decode (one token,
// matrix-vector products). Buffers are sized once for the largest block.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "kv/kv_cache.h"
#include "model/lora.h"
#include "model/model.h"
#include "tensor/ops.h"
#include "util/thread_pool.h"

namespace kvslim {

class MoeFfn;

class Forward {
 public:
  // n_ctx: the context the caller runs in, which picks Phi-3's long or short RoPE factors as
  // llama.cpp does (0: the model's trained context).
  Forward(const Model& model, int max_block, int64_t n_ctx = 0);
  ~Forward();

  // Runs `n` tokens at positions pos0 .. pos0+n-1, appending their keys and values to `cache`.
  // Returns the logits of the last token (n_vocab floats), or, with all_logits, of every token
  // ([n][n_vocab]); valid until the next call. With `last_logits_out` (n_vocab floats, ignored
  // with all_logits) the output projection writes the last token's logits there and returns it:
  // a caller that keeps them (a session's decode step) needs no copy.
  const float* run(const int32_t* tokens, int n, int64_t pos0, KvCache& cache, ThreadPool& pool,
                   bool all_logits = false, float* last_logits_out = nullptr);
  // The same for `n` rows given as embeddings (x is [n][dim]) instead of token ids, with `lora`
  // (may be null) added to the seven projections of these rows only (LookaheadKV's rows).
  const float* run_rows(const float* x, int n, int64_t pos0, KvCache& cache, ThreadPool& pool,
                        const LoraAdapter* lora = nullptr, bool all_logits = false);

  int max_block() const { return max_block_; }

  // Sees each layer's attention output before the output projection ([n][n_heads * head_dim],
  // valid during the call) as it is computed: the evaluation's attention-output error. Empty
  // by default, which costs one test per layer.
  using AttentionOutputHook = std::function<void(int layer, const float* out, int n)>;
  void set_attention_output_hook(AttentionOutputHook hook) { attention_output_hook_ = std::move(hook); }

 private:
  // The layers and the output over the n rows already in x_.
  const float* run_embedded(int n, int64_t pos0, KvCache& cache, ThreadPool& pool, const LoraAdapter* lora,
                            bool all_logits, float* last_logits_out = nullptr);
  // Norm, q/k/v, RoPE, the KV append and attention of the n rows: attn_ out.
  void attention(int layer, int n, int64_t pos0, KvCache& cache, ThreadPool& pool, const LoraAdapter* lora);
  // Moves the last `rows` of the n rows of attn_ and x_ to the front.
  void keep_last_rows(int n, int rows);
  // The output projection of attn_ and the residual add, n rows.
  void attention_output(int layer, int n, ThreadPool& pool, const LoraAdapter* lora);
  void ffn_block(int layer, int n, ThreadPool& pool, const LoraAdapter* lora);
  // gate/up, activation, down of a dense FFN: xn_ in, xn_ out.
  void dense_ffn(int layer, int n, ThreadPool& pool, const LoraAdapter* lora);
  // x += the block's output (xn), after the output's own norm when the layer has one (Gemma 3).
  void residual(int n, const std::vector<float>& post_norm, ThreadPool& pool);

  const Model& model_;
  int max_block_;
  RopeConfig rope_;
  RopeConfig rope_local_;  // sliding-window layers (gemma3): their own base, no scaling
  float q_scale_ = 1.0f;   // makes the kernels' 1/sqrt(head_dim) the model's attention scale
  std::vector<int64_t> positions_;
  // Activations, [max_block][width] each.
  std::vector<float> x_, xn_, q_, k_, v_, attn_, gate_, up_, logits_;
  AttentionOutputHook attention_output_hook_;
  std::unique_ptr<MoeFfn> moe_;  // mixture-of-experts models: the FFN of every layer
  std::vector<float> moe_out_;   // its output, [max_block][dim]
};

}  // namespace kvslim
