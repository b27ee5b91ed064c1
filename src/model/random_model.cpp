#include "model/random_model.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "gguf/gguf.h"
#include "model/gemma3_config.h"
#include "model/gptoss_config.h"
#include "tokenizer/byte_vocab.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace kvslim {

namespace {

void validate(const RandomModelSpec& spec) {
  const ModelConfig& c = spec.config;
  if (c.n_layers < 1 || c.dim < 1 || c.ffn_dim < 1 || c.n_heads < 1 || c.n_kv_heads < 1)
    fail("layers, dim, ffn, heads and kv-heads must all be >= 1");
  if (c.n_heads % c.n_kv_heads != 0) fail("--heads {} is not a multiple of --kv-heads {}", c.n_heads, c.n_kv_heads);
  if (c.head_dim % 2 != 0) fail("the head size {} must be even for RoPE", c.head_dim);
  if (c.n_rot < 2 || c.n_rot > c.head_dim || c.n_rot % 2 != 0)
    fail("--rope-dims {} must be even and in [2, head size {}]", c.n_rot, c.head_dim);
  if (c.arch == Arch::SmolLM3 && c.n_rot != c.head_dim) fail("smollm3 rotates whole heads: --rope-dims must be 0");
  if (!(spec.weight_std >= 0) || spec.weight_std > 100) fail("--weight-std {} must be in [0, 100]", spec.weight_std);
  const int64_t block = dtype_block_size(spec.type);
  if (c.dim % block != 0 || c.ffn_dim % block != 0 || c.q_dim() % block != 0)
    fail("{} needs dim, ffn and heads*head_dim to be multiples of {}", dtype_name(spec.type), block);
  if (c.context_length < 1) fail("--ctx must be >= 1");
  if (c.arch == Arch::Qwen3Moe || c.arch == Arch::GptOss) {
    const MoeConfig& m = c.moe;
    if (m.n_experts < 1 || m.n_experts > 4096) fail("--experts {} must be in [1, 4096]", m.n_experts);
    if (m.n_experts_used < 1 || m.n_experts_used > m.n_experts)
      fail("--experts-used {} must be in [1, --experts {}]", m.n_experts_used, m.n_experts);
  } else if (c.moe.n_experts > 0) {
    fail("--experts is for qwen3moe and gpt-oss (got --arch {})", arch_name(c.arch));
  }
  if (!(c.rope_base > 0)) fail("--rope-base must be > 0");
}

// Uniform weights with standard deviation `std`, by default 1/sqrt(cols), so activations stay
// O(1) through the layers. Each row has its own generator, so the file does not depend on the
// thread count.
std::vector<uint8_t> random_matrix(DType type, int64_t rows, int64_t cols, float std, uint64_t seed, ThreadPool& pool) {
  const size_t bytes_per_row = row_bytes(type, cols);
  std::vector<uint8_t> bytes(bytes_per_row * rows);
  const float half_width = std > 0 ? std * std::sqrt(3.0f) : std::sqrt(3.0f / float(cols));
  pool.parallel_for(rows, [&](int64_t begin, int64_t end) {
    std::vector<float> row(cols);
    for (int64_t r = begin; r < end; ++r) {
      std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + uint64_t(r));
      for (auto& x : row) x = (float(rng() >> 40) * 0x1.0p-24f * 2.0f - 1.0f) * half_width;
      convert_from_f32(row.data(), type, bytes.data() + r * bytes_per_row, cols);
    }
  });
  return bytes;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& values) {
  const auto* p = reinterpret_cast<const uint8_t*>(values.data());
  return std::vector<uint8_t>(p, p + values.size() * sizeof(float));
}

// Norm weights near 1 and small biases, varied so tests notice a weight that is ignored.
std::vector<float> random_vector(int64_t n, float center, float spread, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = center + spread * (float(rng() >> 40) * 0x1.0p-24f * 2.0f - 1.0f);
  return v;
}

}  // namespace

int copy_vocab(const std::string& vocab_path, gguf::Writer& w) {
  if (vocab_path.empty()) return add_byte_vocab(w);
  const gguf::File vocab = gguf::File::open(vocab_path);
  const size_t n_tokens = vocab.get_string_array("tokenizer.ggml.tokens").size();
  if (n_tokens == 0) fail("{}: tokenizer.ggml.tokens is empty", vocab_path);
  for (const auto& entry : vocab.metadata())
    if (entry.key.rfind("tokenizer.", 0) == 0) w.set(entry.key, entry.value);
  return int(n_tokens);
}

void write_random_model(const RandomModelSpec& spec, const std::string& vocab_path, const std::string& out_path) {
  RandomModelSpec s = spec;
  ModelConfig& c = s.config;
  // config.head_dim 0: dim / heads; set (init-model --head-dim), the heads may be wider than dim /
  // heads (Qwen3-30B-A3B: 32 heads of 128 on dim 2048).
  if (c.head_dim <= 0) {
    if (c.n_heads > 0 && c.dim % c.n_heads != 0) fail("--dim {} is not a multiple of --heads {}", c.dim, c.n_heads);
    c.head_dim = c.n_heads > 0 ? c.dim / c.n_heads : 0;
  }
  c.n_rot = s.rope_dims > 0 ? s.rope_dims : c.arch == Arch::Phi3 ? c.head_dim * 3 / 4 / 2 * 2 : c.head_dim;
  if (c.arch == Arch::Phi3) {
    // LongRoPE as Phi-3.5/Phi-4-mini carry it: trained at half the stored context, the
    // attention factor of their config (sqrt(1 + ln(scale) / ln(original context))).
    c.rope_original_context = std::max(1, c.context_length / 2);
    c.rope_attn_factor = c.context_length > c.rope_original_context && c.rope_original_context > 1
                             ? std::sqrt(1.0f + std::log(float(c.context_length) / float(c.rope_original_context)) /
                                                    std::log(float(c.rope_original_context)))
                             : 1.0f;
  }
  if (c.arch == Arch::Qwen3Moe || c.arch == Arch::GptOss) {  // each expert is --ffn wide
    const MoeConfig counts = c.moe;
    c.moe = moe_defaults(c.arch);
    c.moe.n_experts = counts.n_experts;
    c.moe.n_experts_used = counts.n_experts_used;
    c.moe.expert_ffn_dim = c.ffn_dim;
  }
  if (c.arch == Arch::GptOss) {
    // As gpt-oss-20b: YaRN x32 over an original context of 4096 tokens, both kinds of layer at the
    // same base; rope.scaling.attn_factor as its files leave it (1).
    c.rope_ext_factor = 1.0f;
    c.rope_freq_scale = 1.0f / 32.0f;
    c.rope_freq_scale_local = c.rope_freq_scale;
    c.rope_original_context = 4096;
    c.rope_attn_factor = yarn_attn_factor(32.0f, 1.0f);
    c.rope_base_local = c.rope_base;
  }
  validate(s);
  c.layer_window.clear();
  if (c.is_gemma3() && s.sliding_window > 0) {
    if (s.sliding_window > c.context_length)
      fail("--window {} is larger than the context length --ctx {}", s.sliding_window, c.context_length);
    if (s.swa_period < 0) fail("--swa-period must be >= 0 (got {})", s.swa_period);
    for (int l = 0; l < c.n_layers; ++l)
      c.layer_window.push_back(gemma3_layer_is_local(l, s.swa_period) ? s.sliding_window : 0);
  } else if (c.is_gptoss()) {  // llama.cpp's default layout, 128 tokens in gpt-oss
    const int window = s.sliding_window > 0 ? s.sliding_window : std::min(128, c.context_length);
    if (window > c.context_length)
      fail("--window {} is larger than the context length --ctx {}", window, c.context_length);
    for (int l = 0; l < c.n_layers; ++l) c.layer_window.push_back(gptoss_layer_slides(l) ? window : 0);
  } else if (s.sliding_window > 0) {
    fail("--window is for gemma3 and gpt-oss (got --arch {})", arch_name(c.arch));
  }

  gguf::Writer w;
  c.n_vocab = copy_vocab(vocab_path, w);
  c.to_gguf(w);
  w.set("general.name", gguf::Value::of_string("kvslim random model"));

  ThreadPool pool;
  uint64_t tensor_seed = s.seed * 1000003;
  const uint32_t type_id = ggml_type_id(s.type);
  auto matrix = [&](const std::string& name, int64_t cols, int64_t rows) {
    w.add_tensor(name, type_id, {uint64_t(cols), uint64_t(rows)},
                 random_matrix(s.type, rows, cols, s.weight_std, ++tensor_seed, pool));
  };
  auto vector = [&](const std::string& name, int64_t n, float center, float spread) {
    w.add_tensor(name, ggml_type_id(DType::F32), {uint64_t(n)},
                 f32_bytes(random_vector(n, center, spread, ++tensor_seed)));
  };

  matrix("token_embd.weight", c.dim, c.n_vocab);
  vector("output_norm.weight", c.dim, 1.0f, 0.1f);
  if (!s.tied_output) matrix("output.weight", c.dim, c.n_vocab);
  if (s.rope_freqs) vector("rope_freqs.weight", c.n_rot / 2, 2.0f, 1.0f);
  if (c.arch == Arch::Phi3) {  // factors dividing the angles: long ones stretch more
    vector("rope_factors_long.weight", c.n_rot / 2, 4.0f, 3.0f);
    vector("rope_factors_short.weight", c.n_rot / 2, 1.5f, 0.5f);
  }
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    vector(p + "attn_norm.weight", c.dim, 1.0f, 0.1f);
    if (c.fused_projections()) {
      matrix(p + "attn_qkv.weight", c.dim, c.q_dim() + 2 * c.kv_dim());
    } else {
      matrix(p + "attn_q.weight", c.dim, c.q_dim());
      matrix(p + "attn_k.weight", c.dim, c.kv_dim());
      matrix(p + "attn_v.weight", c.dim, c.kv_dim());
    }
    matrix(p + "attn_output.weight", c.q_dim(), c.dim);
    if (c.is_gptoss()) {
      vector(p + "attn_output.bias", c.dim, 0.0f, 0.1f);
      vector(p + "attn_sinks.weight", c.n_heads, 0.0f, 2.0f);  // logits near the scores' scale
    }
    if (c.has_qkv_bias()) {
      vector(p + "attn_q.bias", c.q_dim(), 0.0f, 0.1f);
      vector(p + "attn_k.bias", c.kv_dim(), 0.0f, 0.1f);
      vector(p + "attn_v.bias", c.kv_dim(), 0.0f, 0.1f);
    }
    if (c.has_qk_norm()) {
      vector(p + "attn_q_norm.weight", c.head_dim, 1.0f, 0.1f);
      vector(p + "attn_k_norm.weight", c.head_dim, 1.0f, 0.1f);
    }
    if (c.is_gemma3()) {
      vector(p + "post_attention_norm.weight", c.dim, 1.0f, 0.1f);
      vector(p + "post_ffw_norm.weight", c.dim, 1.0f, 0.1f);
    }
    vector(p + (c.is_gptoss() ? "post_attention_norm.weight" : "ffn_norm.weight"), c.dim, 1.0f, 0.1f);
    if (c.is_moe()) {
      // The router's rows get 4x the matrices' spread (at least 4/sqrt(dim)): with 1/sqrt(dim) its
      // logits are O(1) apart, the softmax nearly flat, and the top k decided by rounding noise.
      const float router_std = 4.0f * (s.weight_std > 0 ? s.weight_std : 1.0f / std::sqrt(float(c.dim)));
      w.add_tensor(p + "ffn_gate_inp.weight", type_id, {uint64_t(c.dim), uint64_t(c.moe.n_experts)},
                   random_matrix(s.type, c.moe.n_experts, c.dim, router_std, ++tensor_seed, pool));
      const uint64_t e = uint64_t(c.moe.n_experts), f = uint64_t(c.ffn_dim), d = uint64_t(c.dim);
      // One random matrix of n_experts x rows is the same bytes as n_experts stacked experts.
      w.add_tensor(p + "ffn_gate_exps.weight", type_id, {d, f, e},
                   random_matrix(s.type, int64_t(e * f), c.dim, s.weight_std, ++tensor_seed, pool));
      w.add_tensor(p + "ffn_up_exps.weight", type_id, {d, f, e},
                   random_matrix(s.type, int64_t(e * f), c.dim, s.weight_std, ++tensor_seed, pool));
      w.add_tensor(p + "ffn_down_exps.weight", type_id, {f, d, e},
                   random_matrix(s.type, int64_t(e * d), c.ffn_dim, s.weight_std, ++tensor_seed, pool));
      if (c.is_gptoss()) {
        vector(p + "ffn_gate_inp.bias", c.moe.n_experts, 0.0f, 0.5f);
        const auto expert_bias = [&](const std::string& name, uint64_t width) {
          w.add_tensor(name, ggml_type_id(DType::F32), {width, e},
                       f32_bytes(random_vector(int64_t(width * e), 0.0f, 0.1f, ++tensor_seed)));
        };
        expert_bias(p + "ffn_gate_exps.bias", f);
        expert_bias(p + "ffn_up_exps.bias", f);
        expert_bias(p + "ffn_down_exps.bias", d);
      }
      continue;
    }
    if (c.fused_projections()) {
      matrix(p + "ffn_up.weight", c.dim, 2 * int64_t(c.ffn_dim));  // gate rows, then up rows
    } else {
      matrix(p + "ffn_gate.weight", c.dim, c.ffn_dim);
      matrix(p + "ffn_up.weight", c.dim, c.ffn_dim);
    }
    matrix(p + "ffn_down.weight", c.ffn_dim, c.dim);
  }
  w.write(out_path);
}

}  // namespace kvslim
