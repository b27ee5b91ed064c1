// Architecture hyper-parameters read from GGUF metadata (`{arch}.*` keys).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kv/kv_shape.h"
#include "model/moe_config.h"

namespace kvslim {

enum class Arch { Llama, Qwen2, Qwen3, Phi3, SmolLM3, Gemma3, Qwen3Moe, GptOss };
const char* arch_name(Arch arch);
Arch arch_from_name(const std::string& name);  // throws, listing the supported ones

struct ModelConfig {
  Arch arch = Arch::Llama;
  int n_layers = 0;
  int dim = 0;  // embedding length
  int ffn_dim = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;  // attention.key_length when present, else dim / n_heads
  int n_rot = 0;     // rope.dimension_count when present, else head_dim
  int n_vocab = 0;   // rows of token_embd.weight
  int context_length = 0;
  float rms_eps = 1e-5f;
  float rope_base = 10000.0f;
  // Phi-3 (LongRoPE): the factor multiplying the rotated pairs (rope.scaling.attn_factor, 1 when
  // absent) and the context up to which the short factor tensor applies, beyond it the long one
  // (rope.scaling.original_context_length, context_length when absent), as llama.cpp chooses.
  float rope_attn_factor = 1.0f;
  int rope_original_context = 0;
  // attention.sliding_window as stored (0: none). Phi-3-mini files carry one; llama.cpp ignores
  // it for phi3 (full attention), and so does kvslim, to compute the same function.
  int sliding_window = 0;
  // SmolLM3: every no_rope_layer_step-th layer (1-based) has no RoPE; 0: every layer rotates.
  int no_rope_layer_step = 0;
  // Sliding-window attention (gemma3, model/gemma3_config.cpp): layer_window[l] is the window of
  // a local layer (a token at position p sees positions in (p - window, p]) and 0 for a global
  // one; empty when every layer is global.
  std::vector<int> layer_window;
  float rope_base_local = 10000.0f;    // RoPE base of the local layers (gemma3/gpt-oss rope.freq_base_swa)
  float rope_freq_scale_local = 1.0f;  // their linear scaling: 1 (gemma3), the global layers' (gpt-oss)
  // YaRN (rope.scaling.type yarn, gpt-oss; tensor/ops.h RopeConfig): ext_factor 1 with yarn, 0
  // otherwise; llama.cpp's default betas (it reads no key for them on gpt-oss); the original
  // context is rope_original_context. rope_attn_factor then holds llama.cpp's yarn_attn_factor.
  float rope_ext_factor = 0.0f;
  float rope_beta_fast = 32.0f;
  float rope_beta_slow = 1.0f;
  float rope_freq_scale = 1.0f;      // linear RoPE scaling of the global layers: 1 / rope.scaling.factor
  float attention_scale = 0.0f;      // scale of q.k; 0: 1 / sqrt(head_dim)
  float final_logit_softcap = 0.0f;  // logits = c * tanh(logits / c) when > 0
  // Mixture-of-experts FFN (qwen3moe; model/moe_config.h): n_experts 0 means a dense FFN.
  MoeConfig moe;

  int group_size() const { return n_heads / n_kv_heads; }
  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  // qwen2/qwen3/phi3 rotate split halves, llama and smollm3 adjacent pairs.
  bool rope_neox() const { return arch != Arch::Llama && arch != Arch::SmolLM3; }
  bool layer_has_rope(int layer) const { return no_rope_layer_step == 0 || (layer + 1) % no_rope_layer_step != 0; }
  // Phi-3 stores q/k/v as one attn_qkv tensor and gate/up as one ffn_up of 2 x ffn rows.
  bool fused_projections() const { return arch == Arch::Phi3; }
  bool has_qkv_bias() const { return arch == Arch::Qwen2 || arch == Arch::GptOss; }
  // gpt-oss (model/gptoss_config.h): attn_output.bias, attn_sinks, post_attention_norm before the
  // MoE FFN.
  bool is_gptoss() const { return arch == Arch::GptOss; }
  bool has_qk_norm() const { return arch == Arch::Qwen3 || arch == Arch::Qwen3Moe || arch == Arch::Gemma3; }
  bool is_moe() const { return moe.n_experts > 0; }
  // Gemma 3: norms after attention and FFN, GELU-tanh gated FFN, embeddings scaled by sqrt(dim).
  bool is_gemma3() const { return arch == Arch::Gemma3; }
  bool is_local_layer(int layer) const { return !layer_window.empty() && layer_window[size_t(layer)] > 0; }

  // Reads and validates the config; throws kvslim::Error naming the missing or bad key.
  static ModelConfig from_gguf(const gguf::File& file);
  // Writes the `general.architecture` and `{arch}.*` keys (used by init-model).
  void to_gguf(gguf::Writer& writer) const;
};

// How the MoE architectures route and activate as llama.cpp fixes it for them (not read from the
// file): qwen3moe renormalises the top k's softmax weights, gpt-oss takes the softmax of the top k
// logits and the clamped SwiGLU. The expert counts and widths are the file's.
MoeConfig moe_defaults(Arch arch);

// The KV cache's view of the model: its shape, with keys and values stored as `key_type` and
// `value_type` (f32 by default: training and reference paths compute in f32).
KvShape kv_shape(const ModelConfig& config, DType key_type = DType::F32, DType value_type = DType::F32);

}  // namespace kvslim
