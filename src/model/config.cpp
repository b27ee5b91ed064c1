#include "model/config.h"

#include "model/gemma3_config.h"
#include "model/gptoss_config.h"
#include "model/moe_config.h"
#include "util/error.h"

namespace kvslim {

const char* arch_name(Arch arch) {
  switch (arch) {
    case Arch::Llama: return "llama";
    case Arch::Qwen2: return "qwen2";
    case Arch::Qwen3: return "qwen3";
    case Arch::Phi3: return "phi3";
    case Arch::SmolLM3: return "smollm3";
    case Arch::Gemma3: return "gemma3";
    case Arch::GptOss: return "gpt-oss";
    case Arch::Qwen3Moe: return "qwen3moe";
  }
  return "?";
}

Arch arch_from_name(const std::string& name) {
  if (name == "llama") return Arch::Llama;
  if (name == "qwen2") return Arch::Qwen2;
  if (name == "qwen3") return Arch::Qwen3;
  if (name == "phi3") return Arch::Phi3;
  if (name == "smollm3") return Arch::SmolLM3;
  if (name == "gemma3") return Arch::Gemma3;
  if (name == "gpt-oss") return Arch::GptOss;
  if (name == "qwen3moe") return Arch::Qwen3Moe;
  fail("unsupported architecture '{}' (supported: llama, qwen2, qwen3, phi3, smollm3, gemma3, qwen3moe, gpt-oss)",
       name);
}

namespace {

int positive_int(const gguf::File& file, const std::string& key, uint64_t limit = 1u << 24) {
  const uint64_t value = file.get_uint(key);
  if (value == 0 || value > limit)
    fail("{}: metadata '{}' = {} is out of range [1, {}]", file.path(), key, value, limit);
  return static_cast<int>(value);
}

// The keys phi3 and smollm3 add (read for every architecture: absent keys leave the defaults).
void read_phi3_smollm3_keys(const gguf::File& file, const std::string& p, ModelConfig& c) {
  c.rope_attn_factor = static_cast<float>(file.get_float_opt(p + "rope.scaling.attn_factor").value_or(1.0));
  if (!(c.rope_attn_factor > 0)) fail("{}: metadata '{}rope.scaling.attn_factor' must be positive", file.path(), p);
  c.rope_original_context = file.get_uint_opt(p + "rope.scaling.original_context_length")
                                ? positive_int(file, p + "rope.scaling.original_context_length", 1u << 24)
                                : c.context_length;
  c.sliding_window =
      file.get_uint_opt(p + "attention.sliding_window") ? int(file.get_uint(p + "attention.sliding_window")) : 0;
  // llama.cpp fixes SmolLM3's interval at 4 (the value of its config.json); the converter writes no key.
  c.no_rope_layer_step = c.arch == Arch::SmolLM3 ? 4 : 0;
  if (c.arch == Arch::SmolLM3 && c.n_rot != c.head_dim)
    fail("{}: smollm3 needs rope.dimension_count {} equal to the head size {}", file.path(), c.n_rot, c.head_dim);
}

}  // namespace

ModelConfig ModelConfig::from_gguf(const gguf::File& file) {
  ModelConfig c;
  const std::string arch = file.get_string("general.architecture");
  c.arch = arch_from_name(arch);
  const std::string p = arch + ".";
  c.n_layers = positive_int(file, p + "block_count", 4096);
  c.dim = positive_int(file, p + "embedding_length");
  // A MoE file's width is its experts' (expert_feed_forward_length); the dense key may be absent.
  c.ffn_dim = file.get_uint_opt(p + "feed_forward_length") || c.arch != Arch::Qwen3Moe
                  ? positive_int(file, p + "feed_forward_length")
                  : 0;
  c.n_heads = positive_int(file, p + "attention.head_count", 4096);
  c.n_kv_heads = file.get_uint_opt(p + "attention.head_count_kv")
                     ? positive_int(file, p + "attention.head_count_kv", 4096)
                     : c.n_heads;
  if (c.n_heads % c.n_kv_heads != 0)
    fail("{}: head_count {} is not a multiple of head_count_kv {}", file.path(), c.n_heads, c.n_kv_heads);
  c.head_dim = file.get_uint_opt(p + "attention.key_length") ? positive_int(file, p + "attention.key_length", 4096)
                                                             : c.dim / c.n_heads;
  if (auto value_length = file.get_uint_opt(p + "attention.value_length");
      value_length && *value_length != uint64_t(c.head_dim))
    fail("{}: attention.value_length {} differs from key_length {} (unsupported)", file.path(), *value_length,
         c.head_dim);
  if (!file.get_uint_opt(p + "attention.key_length") && c.dim % c.n_heads != 0)
    fail("{}: embedding_length {} is not a multiple of head_count {}", file.path(), c.dim, c.n_heads);
  c.n_rot =
      file.get_uint_opt(p + "rope.dimension_count") ? positive_int(file, p + "rope.dimension_count", 4096) : c.head_dim;
  if (c.n_rot > c.head_dim || c.n_rot % 2 != 0)
    fail("{}: rope.dimension_count {} must be even and at most the head size {}", file.path(), c.n_rot, c.head_dim);
  c.context_length =
      file.get_uint_opt(p + "context_length") ? positive_int(file, p + "context_length", 1u << 24) : 2048;
  c.rms_eps = static_cast<float>(file.get_float_opt(p + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  c.rope_base = static_cast<float>(file.get_float_opt(p + "rope.freq_base").value_or(10000.0));
  if (!(c.rms_eps > 0) || !(c.rope_base > 0)) fail("{}: rms epsilon and rope.freq_base must be positive", file.path());
  // llama3 scaling is carried by the rope_freqs.weight tensor, Phi-3's LongRoPE by the
  // rope_factors_long/short tensors; both are read with the weights.
  const std::string scaling = file.get_string_opt(p + "rope.scaling.type").value_or("none");
  if (c.arch == Arch::Gemma3) {
    read_gemma3_config(file, c);
  } else if (c.arch == Arch::GptOss) {
    // read after the generic scaling keys, below
  } else if (scaling != "none" && scaling != "llama3" && scaling != "longrope") {
    fail("{}: unsupported rope.scaling.type '{}' (supported: none, llama3, longrope)", file.path(), scaling);
  }
  read_phi3_smollm3_keys(file, p, c);
  if (c.arch == Arch::GptOss) read_gptoss_config(file, c);
  if (c.arch == Arch::Qwen3Moe || c.arch == Arch::GptOss)
    c.moe = read_moe_config(file, p, moe_defaults(c.arch), c.ffn_dim);
  return c;
}

MoeConfig moe_defaults(Arch arch) {
  MoeConfig moe;
  if (arch == Arch::Qwen3Moe) moe.normalize_weights = true;  // softmax router, the top k's weights sum to 1
  if (arch == Arch::GptOss) {  // the top k of the router's logits, softmax over those k; clamped SwiGLU
    moe.gating = MoeGating::SoftmaxWeight;
    moe.activation = MoeActivation::SwigluOai;
  }
  return moe;
}

void ModelConfig::to_gguf(gguf::Writer& w) const {
  using gguf::Value;
  const std::string arch = arch_name(this->arch);
  const std::string p = arch + ".";
  w.set("general.architecture", Value::of_string(arch));
  w.set(p + "block_count", Value::of_u32(n_layers));
  w.set(p + "embedding_length", Value::of_u32(dim));
  if (ffn_dim > 0) w.set(p + "feed_forward_length", Value::of_u32(ffn_dim));
  w.set(p + "attention.head_count", Value::of_u32(n_heads));
  w.set(p + "attention.head_count_kv", Value::of_u32(n_kv_heads));
  w.set(p + "attention.key_length", Value::of_u32(head_dim));
  w.set(p + "attention.value_length", Value::of_u32(head_dim));
  w.set(p + "rope.dimension_count", Value::of_u32(n_rot));
  w.set(p + "context_length", Value::of_u32(context_length));
  w.set(p + "attention.layer_norm_rms_epsilon", Value::of_f32(rms_eps));
  w.set(p + "rope.freq_base", Value::of_f32(rope_base));
  if (arch == "phi3") {
    w.set(p + "rope.scaling.attn_factor", Value::of_f32(rope_attn_factor));
    w.set(p + "rope.scaling.original_context_length", Value::of_u32(rope_original_context));
  }
  if (this->arch == Arch::Gemma3) write_gemma3_config(*this, w);
  if (this->arch == Arch::GptOss) {
    // The stored attn_factor is the one before read_gptoss_config multiplied YaRN's in.
    const float yarn = rope_ext_factor != 0.0f ? yarn_attn_factor(1.0f / rope_freq_scale, 1.0f) : 1.0f;
    w.set(p + "rope.scaling.attn_factor", Value::of_f32(rope_attn_factor / yarn));
    w.set(p + "rope.scaling.original_context_length", Value::of_u32(rope_original_context));
    write_gptoss_config(*this, w);
  }
  if (is_moe()) write_moe_config(moe, p, w);
}

KvShape kv_shape(const ModelConfig& c, DType key_type, DType value_type) {
  return {c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, key_type, value_type, c.layer_window, {}};
}

}  // namespace kvslim
