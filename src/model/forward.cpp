#include "model/forward.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "model/moe_ffn.h"
#include "tensor/ops.h"
#include "util/error.h"
#include "util/op_profile.h"

namespace kvslim {

namespace {

// A projection y = W x, plus the adapter's low-rank term when the rows carry one.
void project(const WeightView& w, const LoraAdapter* lora, int layer, LoraSite site, const float* x, int n, float* y,
             ThreadPool& pool) {
  matmul(w, x, n, y, pool);
  if (lora) lora->apply(layer, site, x, n, y, pool);
}

// Several projections of the same x (q/k/v, gate/up). For one token they share a single pool
// dispatch (matvec_multi), which is where decode's synchronisation cost goes; for a block, one
// packing of x and one queue of weight panels (matmul_multi). Results are the same as one
// project() each.
template <size_t N>
void project_same_x(const std::array<const WeightView*, N>& ws, const LoraAdapter* lora, int layer,
                    const std::array<LoraSite, N>& sites, const float* x, int n, const std::array<float*, N>& ys,
                    ThreadPool& pool) {
  std::array<WeightView, N> views;
  for (size_t i = 0; i < N; ++i) views[i] = *ws[i];
  if (n == 1)
    matvec_multi(views, x, ys, pool);
  else
    matmul_multi(views, x, n, ys, pool);
  if (lora)
    for (size_t i = 0; i < N; ++i) lora->apply(layer, sites[i], x, n, ys[i], pool);
}

void add_bias(float* y, const std::vector<float>& bias, int n) {
  if (bias.empty()) return;
  for (int t = 0; t < n; ++t) add_inplace(y + int64_t(t) * bias.size(), bias.data(), bias.size());
}

// RMS-normalises n_rows rows of `width` in place; nothing when the weight is absent. Qwen3 and
// Gemma 3 normalise each head's query and key before RoPE; Gemma 3 also the attention and FFN
// outputs before the residual.
void norm_rows(float* x, int n_rows, int width, const std::vector<float>& weight, float eps) {
  if (weight.empty()) return;
  for (int r = 0; r < n_rows; ++r) rmsnorm(x + int64_t(r) * width, weight.data(), x + int64_t(r) * width, width, eps);
}

void scale_inplace(float* x, int64_t n, float scale) {
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

// Calls fn(t0, t1) over [0, n) split by token across the pool's threads. The per-token ops of a
// block (norms, RoPE, the gated activation, the residual add) ran on the calling thread alone,
// with the other threads idle: 90 ms of a 512-token F16 prefill on 2 threads (2026-11-29). Small
// blocks (decode's one token) stay on the caller, where a dispatch would cost more than the op.
template <class Fn>
void for_tokens(int n, ThreadPool& pool, Fn&& fn) {
  if (n < 16)
    fn(int64_t{0}, int64_t{n});
  else
    pool.parallel_for_fn(n, fn);
}

}  // namespace

Forward::Forward(const Model& model, int max_block, int64_t n_ctx) : model_(model), max_block_(max_block) {
  const ModelConfig& c = model.config();
  rope_.head_dim = c.head_dim;
  rope_.n_rot = c.n_rot;
  rope_.base = c.rope_base;
  rope_.neox = c.rope_neox();
  const std::vector<float>& factors = model.rope_factors(n_ctx);
  rope_.freq_factors = factors.empty() ? nullptr : factors.data();
  rope_.attn_factor = c.rope_attn_factor;
  rope_.freq_scale = c.rope_freq_scale;
  rope_.ext_factor = c.rope_ext_factor;
  rope_.beta_fast = c.rope_beta_fast;
  rope_.beta_slow = c.rope_beta_slow;
  rope_.original_context = c.rope_original_context;
  rope_local_ = rope_;
  rope_local_.base = c.rope_base_local;
  rope_local_.freq_scale = c.rope_freq_scale_local;
  if (c.attention_scale > 0) {
    const double scale = double(c.attention_scale) * std::sqrt(double(c.head_dim));
    if (std::abs(scale - 1.0) > 1e-6) q_scale_ = float(scale);
  }
  const size_t b = max_block;
  positions_.resize(b);
  x_.resize(b * c.dim);
  xn_.resize(b * c.dim);
  q_.resize(b * c.q_dim());
  k_.resize(b * c.kv_dim());
  v_.resize(b * c.kv_dim());
  attn_.resize(b * c.q_dim());
  gate_.resize(b * c.ffn_dim);
  up_.resize(b * c.ffn_dim);
  logits_.resize(b * c.n_vocab);
  if (c.is_moe()) {
    moe_ = std::make_unique<MoeFfn>(c.moe, c.dim, max_block);
    moe_out_.resize(b * c.dim);
  }
}

Forward::~Forward() = default;

const float* Forward::run(const int32_t* tokens, int n, int64_t pos0, KvCache& cache, ThreadPool& pool, bool all_logits,
                          float* last_logits_out) {
  const ModelConfig& c = model_.config();
  if (n < 1 || n > max_block_) fail("forward block of {} tokens outside [1, {}]", n, max_block_);
  {
    ProfileScope prof(ProfOp::Embed);
    for (int t = 0; t < n; ++t) {
      if (tokens[t] < 0 || tokens[t] >= c.n_vocab)
        fail("token id {} is outside the vocabulary [0, {})", tokens[t], c.n_vocab);
      convert_to_f32(model_.token_embedding().type, model_.token_embedding().row(tokens[t]), &x_[size_t(t) * c.dim],
                     c.dim);
    }
    // Gemma scales token embeddings (not given rows: LookaheadKV's learned rows) by sqrt(dim).
    if (c.is_gemma3()) scale_inplace(x_.data(), int64_t(n) * c.dim, std::sqrt(float(c.dim)));
  }
  return run_embedded(n, pos0, cache, pool, nullptr, all_logits, last_logits_out);
}

const float* Forward::run_rows(const float* x, int n, int64_t pos0, KvCache& cache, ThreadPool& pool,
                               const LoraAdapter* lora, bool all_logits) {
  const ModelConfig& c = model_.config();
  if (n < 1 || n > max_block_) fail("forward block of {} rows outside [1, {}]", n, max_block_);
  if (lora && !lora->fits(c)) fail("the LoRA adapter's layers or widths do not match the model");
  std::copy(x, x + int64_t(n) * c.dim, x_.begin());
  return run_embedded(n, pos0, cache, pool, lora, all_logits);
}

const float* Forward::run_embedded(int n, int64_t pos0, KvCache& cache, ThreadPool& pool, const LoraAdapter* lora,
                                   bool all_logits, float* last_logits_out) {
  const ModelConfig& c = model_.config();
  for (int t = 0; t < n; ++t) positions_[t] = pos0 + t;
  const int rows = all_logits ? n : 1;
  for (int l = 0; l < c.n_layers; ++l) {
    attention(l, n, pos0, cache, pool, lora);
    // Past the last layer's attention, a row only feeds its own logits: without all_logits only
    // the last row goes on (as llama.cpp does), which spares that layer's output projection and
    // FFN for the other n - 1 rows, 1/n_layers of a prefill's products.
    const bool last_layer = l == c.n_layers - 1;
    if (last_layer && rows < n) keep_last_rows(n, rows);
    const int m = last_layer ? rows : n;
    attention_output(l, m, pool, lora);
    ffn_block(l, m, pool, lora);
  }
  {
    ProfileScope prof(ProfOp::Norm);
    for (int t = 0; t < rows; ++t)
      rmsnorm(&x_[size_t(t) * c.dim], model_.output_norm().data(), &xn_[size_t(t) * c.dim], c.dim, c.rms_eps);
  }
  ProfileScope prof(ProfOp::MatvecOutput);
  float* out = all_logits || !last_logits_out ? logits_.data() : last_logits_out;
  matmul(model_.output(), xn_.data(), rows, out, pool);
  if (const float cap = c.final_logit_softcap; cap > 0)
    for (int64_t i = 0; i < int64_t(rows) * c.n_vocab; ++i) out[i] = cap * std::tanh(out[i] / cap);
  return out;
}

void Forward::attention(int layer, int n, int64_t pos0, KvCache& cache, ThreadPool& pool, const LoraAdapter* lora) {
  const ModelConfig& c = model_.config();
  const LayerWeights& w = model_.layers()[layer];
  {
    ProfileScope prof(ProfOp::Norm);
    for_tokens(n, pool, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t)
        rmsnorm(&x_[size_t(t) * c.dim], w.attn_norm.data(), &xn_[size_t(t) * c.dim], c.dim, c.rms_eps);
    });
  }
  {
    ProfileScope prof(ProfOp::MatvecQKV);
    project_same_x<3>({&w.wq, &w.wk, &w.wv}, lora, layer, {LoraSite::Q, LoraSite::K, LoraSite::V}, xn_.data(), n,
                      {q_.data(), k_.data(), v_.data()}, pool);
    add_bias(q_.data(), w.bq, n);
    add_bias(k_.data(), w.bk, n);
    add_bias(v_.data(), w.bv, n);
  }
  {
    ProfileScope prof(ProfOp::Rope);
    const RopeConfig& rope = c.is_local_layer(layer) ? rope_local_ : rope_;
    for_tokens(n, pool, [&](int64_t t0, int64_t t1) {
      float* q = &q_[size_t(t0) * c.q_dim()];
      float* k = &k_[size_t(t0) * c.kv_dim()];
      const int tokens = int(t1 - t0);
      norm_rows(q, tokens * c.n_heads, c.head_dim, w.q_norm, c.rms_eps);
      norm_rows(k, tokens * c.n_kv_heads, c.head_dim, w.k_norm, c.rms_eps);
      for (int64_t t = t0; t < t1 && c.layer_has_rope(layer); ++t) {
        rope_inplace(&q_[size_t(t) * c.q_dim()], c.n_heads, pos0 + t, rope);
        rope_inplace(&k_[size_t(t) * c.kv_dim()], c.n_kv_heads, pos0 + t, rope);
      }
      if (q_scale_ != 1.0f) scale_inplace(q, int64_t(tokens) * c.q_dim(), q_scale_);
    });
  }
  {
    ProfileScope prof(ProfOp::KvAppend);
    // A cache built from the config alone (kv_shape(config)) lacks the sinks: every softmax would
    // silently leave them out.
    if (!w.attn_sinks.empty() && cache.sinks(layer) == nullptr)
      fail("layer {} has attention sinks but the KV cache holds none (build it with kv_shape(const Model&))", layer);
    cache.append(layer, k_.data(), v_.data(), n, positions_.data());
  }
  {
    ProfileScope prof(ProfOp::Attention);
    cache.attend(layer, q_.data(), n, attn_.data(), pool);
  }
  if (attention_output_hook_) attention_output_hook_(layer, attn_.data(), n);
}

void Forward::keep_last_rows(int n, int rows) {
  const ModelConfig& c = model_.config();
  const int from = n - rows;
  std::copy(attn_.begin() + int64_t(from) * c.q_dim(), attn_.begin() + int64_t(n) * c.q_dim(), attn_.begin());
  std::copy(x_.begin() + int64_t(from) * c.dim, x_.begin() + int64_t(n) * c.dim, x_.begin());
}

void Forward::attention_output(int layer, int n, ThreadPool& pool, const LoraAdapter* lora) {
  const LayerWeights& w = model_.layers()[layer];
  {
    ProfileScope prof(ProfOp::MatvecO);
    project(w.wo, lora, layer, LoraSite::O, attn_.data(), n, xn_.data(), pool);
    add_bias(xn_.data(), w.bo, n);  // gpt-oss
  }
  residual(n, w.post_attn_norm, pool);
}

void Forward::residual(int n, const std::vector<float>& post_norm, ThreadPool& pool) {
  const ModelConfig& c = model_.config();
  ProfileScope prof(ProfOp::Residual);
  for_tokens(n, pool, [&](int64_t t0, int64_t t1) {
    float* out = &xn_[size_t(t0) * c.dim];
    norm_rows(out, int(t1 - t0), c.dim, post_norm, c.rms_eps);
    add_inplace(&x_[size_t(t0) * c.dim], out, (t1 - t0) * c.dim);
  });
}

void Forward::ffn_block(int layer, int n, ThreadPool& pool, const LoraAdapter* lora) {
  const ModelConfig& c = model_.config();
  const LayerWeights& w = model_.layers()[layer];
  {
    ProfileScope prof(ProfOp::Norm);
    for_tokens(n, pool, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t)
        rmsnorm(&x_[size_t(t) * c.dim], w.ffn_norm.data(), &xn_[size_t(t) * c.dim], c.dim, c.rms_eps);
    });
  }
  if (moe_) {
    // The router, the k experts per token and their weighted sum (model/moe_ffn.h).
    ProfileScope prof(ProfOp::Moe);
    moe_->run(w.moe, xn_.data(), n, moe_out_.data(), pool, lora, layer);
    std::copy_n(moe_out_.data(), int64_t(n) * c.dim, xn_.data());
  } else {
    dense_ffn(layer, n, pool, lora);
  }
  residual(n, w.post_ffn_norm, pool);
}

void Forward::dense_ffn(int layer, int n, ThreadPool& pool, const LoraAdapter* lora) {
  const ModelConfig& c = model_.config();
  const LayerWeights& w = model_.layers()[layer];
  {
    ProfileScope prof(ProfOp::MatvecGateUp);
    project_same_x<2>({&w.w_gate, &w.w_up}, lora, layer, {LoraSite::Gate, LoraSite::Up}, xn_.data(), n,
                      {gate_.data(), up_.data()}, pool);
  }
  {
    ProfileScope prof(ProfOp::Swiglu);
    // Row by row, so that which values take the kernels' vector path (and its exp) does not
    // depend on how the tokens were split.
    for_tokens(n, pool, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        float* g = &gate_[size_t(t) * c.ffn_dim];
        const float* u = &up_[size_t(t) * c.ffn_dim];
        if (c.is_gemma3())
          gelu_tanh_gated(g, u, g, c.ffn_dim);
        else
          swiglu(g, u, g, c.ffn_dim);
      }
    });
  }
  {
    ProfileScope prof(ProfOp::MatvecDown);
    project(w.w_down, lora, layer, LoraSite::Down, gate_.data(), n, xn_.data(), pool);
  }
}

}  // namespace kvslim
