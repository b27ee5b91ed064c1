#include "train/train_model.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "util/error.h"

namespace kvslim::train {

ModelConfig training_config(ModelConfig c) {
  if (c.arch != Arch::Llama) fail("training supports the llama architecture only, not {}", arch_name(c.arch));
  if (c.n_layers < 1 || c.dim < 1 || c.ffn_dim < 1 || c.n_heads < 1 || c.n_kv_heads < 1 || c.n_vocab < 1)
    fail("layers, dim, ffn, heads, kv-heads and vocabulary size must all be >= 1");
  if (c.n_heads % c.n_kv_heads != 0) fail("heads {} is not a multiple of kv-heads {}", c.n_heads, c.n_kv_heads);
  if (c.dim % c.n_heads != 0) fail("dim {} is not a multiple of heads {}", c.dim, c.n_heads);
  c.head_dim = c.dim / c.n_heads;
  c.n_rot = c.head_dim;
  if (c.head_dim % 2 != 0) fail("the head size dim/heads = {} must be even for RoPE", c.head_dim);
  if (c.context_length < 1) fail("context length must be >= 1");
  if (!(c.rope_base > 0) || !(c.rms_eps > 0)) fail("rope base and RMS epsilon must be positive");
  return c;
}

// ---- layout ----

ParamLayout::ParamLayout(const ModelConfig& c, bool tied_output) {
  token_embd_ = add("token_embd.weight", c.n_vocab, c.dim, false);
  output_norm_ = add("output_norm.weight", 1, c.dim, false);
  output_ = tied_output ? token_embd_ : add("output.weight", c.n_vocab, c.dim, true);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    Layer L;
    L.attn_norm = add(p + "attn_norm.weight", 1, c.dim, false);
    L.wq = add(p + "attn_q.weight", c.q_dim(), c.dim, true);
    L.wk = add(p + "attn_k.weight", c.kv_dim(), c.dim, true);
    L.wv = add(p + "attn_v.weight", c.kv_dim(), c.dim, true);
    L.wo = add(p + "attn_output.weight", c.dim, c.q_dim(), true);
    L.ffn_norm = add(p + "ffn_norm.weight", 1, c.dim, false);
    L.w_gate = add(p + "ffn_gate.weight", c.ffn_dim, c.dim, true);
    L.w_up = add(p + "ffn_up.weight", c.ffn_dim, c.dim, true);
    L.w_down = add(p + "ffn_down.weight", c.dim, c.ffn_dim, true);
    layers_.push_back(L);
  }
}

int64_t ParamLayout::add(std::string name, int64_t rows, int64_t cols, bool decay) {
  tensors_.push_back(ParamTensor{std::move(name), size_, rows, cols, decay});
  size_ += rows * cols;
  return tensors_.back().offset;
}

const ParamTensor& ParamLayout::find(std::string_view name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return t;
  fail("the model has no parameter tensor '{}'", name);
}

// ---- model ----

template <class T>
TrainModel<T>::TrainModel(const ModelConfig& config, bool tied_output)
    : config_(training_config(config)),
      tied_(tied_output),
      layout_(config_, tied_output),
      rope_(config_.head_dim, double(config_.rope_base), config_.context_length),
      shape_{config_.n_heads, config_.n_kv_heads, config_.head_dim},
      params_(size_t(layout_.size())),
      grads_(size_t(layout_.size())),
      acts_(size_t(config_.n_layers)) {}

template <class T>
void TrainModel<T>::init_params(uint64_t seed) {
  const double residual_scale = 1.0 / std::sqrt(2.0 * config_.n_layers);
  const auto& tensors = layout_.tensors();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const ParamTensor& t = tensors[i];
    T* p = params_.data() + t.offset;
    if (t.rows == 1) {  // norm weights
      std::fill_n(p, t.size(), T(1));
      continue;
    }
    const bool residual = t.name.ends_with("attn_output.weight") || t.name.ends_with("ffn_down.weight");
    std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + i);
    std::normal_distribution<double> normal(0.0, residual ? 0.02 * residual_scale : 0.02);
    for (int64_t j = 0; j < t.size(); ++j) p[j] = T(normal(rng));
  }
}

template <class T>
void TrainModel<T>::zero_grads() {
  std::fill(grads_.begin(), grads_.end(), T(0));
}

template <class T>
void TrainModel<T>::resize_activations(int64_t n) {
  const ModelConfig& c = config_;
  const auto sz = [n](int64_t width) { return size_t(n * width); };
  for (auto& a : acts_) {
    a.x.resize(sz(c.dim));
    a.rstd1.resize(sz(1));
    a.xn1.resize(sz(c.dim));
    a.q.resize(sz(c.q_dim()));
    a.k.resize(sz(c.kv_dim()));
    a.v.resize(sz(c.kv_dim()));
    a.att.resize(sz(c.q_dim()));
    a.x_mid.resize(sz(c.dim));
    a.rstd2.resize(sz(1));
    a.xn2.resize(sz(c.dim));
    a.gate.resize(sz(c.ffn_dim));
    a.up.resize(sz(c.ffn_dim));
    a.h.resize(sz(c.ffn_dim));
  }
  x_final_.resize(sz(c.dim));
  rstd_final_.resize(sz(1));
  xn_final_.resize(sz(c.dim));
  logits_.resize(sz(c.n_vocab));
  for (auto* g : {&dx_, &dxn_}) g->resize(sz(c.dim));
  for (auto* g : {&datt_, &dq_}) g->resize(sz(c.q_dim()));
  for (auto* g : {&dk_, &dv_}) g->resize(sz(c.kv_dim()));
  for (auto* g : {&dh_, &dgate_, &dup_}) g->resize(sz(c.ffn_dim));
}

template <class T>
const std::vector<T>& TrainModel<T>::forward_logits(const std::vector<TrainSequence>& batch, ThreadPool& pool) {
  const ModelConfig& c = config_;
  inputs_.clear();
  targets_.clear();
  positions_.clear();
  weights_.clear();
  seq_starts_.assign(1, 0);
  for (size_t s = 0; s < batch.size(); ++s) {
    const TrainSequence& seq = batch[s];
    const int64_t len = int64_t(seq.tokens.size());
    if (len < 2) fail("training sequence {} has {} tokens; at least 2 are needed", s, len);
    if (len - 1 > c.context_length)
      fail("training sequence {} has {} tokens, more than the context length {} + 1", s, len, c.context_length);
    if (seq.weights.size() != seq.tokens.size())
      fail("training sequence {} has {} tokens but {} loss weights", s, len, seq.weights.size());
    for (int64_t t = 0; t < len; ++t)
      if (seq.tokens[t] < 0 || seq.tokens[t] >= c.n_vocab)
        fail("training sequence {}: token id {} outside the vocabulary [0, {})", s, seq.tokens[t], c.n_vocab);
    inputs_.insert(inputs_.end(), seq.tokens.begin(), seq.tokens.end() - 1);
    targets_.insert(targets_.end(), seq.tokens.begin() + 1, seq.tokens.end());
    weights_.insert(weights_.end(), seq.weights.begin() + 1, seq.weights.end());
    for (int64_t t = 0; t + 1 < len; ++t) positions_.push_back(int32_t(t));
    seq_starts_.push_back(int64_t(inputs_.size()));
  }
  n_ = int64_t(inputs_.size());
  if (n_ == 0) fail("empty training batch");
  resize_activations(n_);

  const T* p = params_.data();
  embedding_forward(p + layout_.token_embd(), inputs_.data(), n_, c.dim, acts_[0].x.data());
  for (int l = 0; l < c.n_layers; ++l) {
    attention_block(l, pool);
    ffn_block(l, pool);
  }
  rmsnorm_forward(x_final_.data(), p + layout_.output_norm(), n_, c.dim, T(c.rms_eps), xn_final_.data(),
                  rstd_final_.data(), pool);
  linear_forward(xn_final_.data(), p + layout_.output(), (const T*)nullptr, n_, c.dim, c.n_vocab, logits_.data(), pool);
  have_probs_ = false;
  return logits_;
}

template <class T>
void TrainModel<T>::attention_block(int l, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const ParamLayout::Layer& w = layout_.layers()[l];
  const T* p = params_.data();
  LayerActivations& a = acts_[l];
  rmsnorm_forward(a.x.data(), p + w.attn_norm, n_, c.dim, T(c.rms_eps), a.xn1.data(), a.rstd1.data(), pool);
  linear_forward(a.xn1.data(), p + w.wq, (const T*)nullptr, n_, c.dim, c.q_dim(), a.q.data(), pool);
  linear_forward(a.xn1.data(), p + w.wk, (const T*)nullptr, n_, c.dim, c.kv_dim(), a.k.data(), pool);
  linear_forward(a.xn1.data(), p + w.wv, (const T*)nullptr, n_, c.dim, c.kv_dim(), a.v.data(), pool);
  rope_forward(a.q.data(), n_, c.n_heads, positions_.data(), rope_);
  rope_forward(a.k.data(), n_, c.n_kv_heads, positions_.data(), rope_);
  attention_forward(a.q.data(), a.k.data(), a.v.data(), seq_starts_, shape_, a.att.data(), pool);
  linear_forward(a.att.data(), p + w.wo, (const T*)nullptr, n_, c.q_dim(), c.dim, a.x_mid.data(), pool);
  for (int64_t i = 0; i < n_ * c.dim; ++i) a.x_mid[i] += a.x[i];
}

template <class T>
void TrainModel<T>::ffn_block(int l, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const ParamLayout::Layer& w = layout_.layers()[l];
  const T* p = params_.data();
  LayerActivations& a = acts_[l];
  rmsnorm_forward(a.x_mid.data(), p + w.ffn_norm, n_, c.dim, T(c.rms_eps), a.xn2.data(), a.rstd2.data(), pool);
  linear_forward(a.xn2.data(), p + w.w_gate, (const T*)nullptr, n_, c.dim, c.ffn_dim, a.gate.data(), pool);
  linear_forward(a.xn2.data(), p + w.w_up, (const T*)nullptr, n_, c.dim, c.ffn_dim, a.up.data(), pool);
  swiglu_forward(a.gate.data(), a.up.data(), n_ * c.ffn_dim, a.h.data());
  T* next = l + 1 < c.n_layers ? acts_[l + 1].x.data() : x_final_.data();
  linear_forward(a.h.data(), p + w.w_down, (const T*)nullptr, n_, c.ffn_dim, c.dim, next, pool);
  for (int64_t i = 0; i < n_ * c.dim; ++i) next[i] += a.x_mid[i];
}

template <class T>
double TrainModel<T>::forward(const std::vector<TrainSequence>& batch, ThreadPool& pool) {
  forward_logits(batch, pool);
  nll_.resize(size_t(n_));
  const double loss =
      cross_entropy_forward(logits_.data(), targets_.data(), weights_.data(), n_, config_.n_vocab, nll_.data(), pool);
  have_probs_ = true;
  return loss;
}

template <class T>
void TrainModel<T>::backward(T scale, ThreadPool& pool) {
  if (!have_probs_) fail("backward() needs a forward() first (each forward allows one backward)");
  have_probs_ = false;
  const ModelConfig& c = config_;
  const T* p = params_.data();
  T* g = grads_.data();
  cross_entropy_backward(logits_.data(), targets_.data(), weights_.data(), n_, c.n_vocab, scale, pool);
  linear_backward(xn_final_.data(), p + layout_.output(), logits_.data(), n_, c.dim, c.n_vocab, dxn_.data(), false,
                  g + layout_.output(), (T*)nullptr, pool);
  std::fill_n(dx_.begin(), n_ * c.dim, T(0));
  rmsnorm_backward(x_final_.data(), p + layout_.output_norm(), rstd_final_.data(), dxn_.data(), n_, c.dim, dx_.data(),
                   g + layout_.output_norm(), pool);
  for (int l = c.n_layers - 1; l >= 0; --l) {
    ffn_block_backward(l, pool);
    attention_block_backward(l, pool);
  }
  embedding_backward(dx_.data(), inputs_.data(), n_, c.dim, g + layout_.token_embd());
}

// On entry dx_ is d(loss)/d(block output); on exit d(loss)/d(x_mid).
template <class T>
void TrainModel<T>::ffn_block_backward(int l, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const ParamLayout::Layer& w = layout_.layers()[l];
  const T* p = params_.data();
  T* g = grads_.data();
  LayerActivations& a = acts_[l];
  linear_backward(a.h.data(), p + w.w_down, dx_.data(), n_, c.ffn_dim, c.dim, dh_.data(), false, g + w.w_down,
                  (T*)nullptr, pool);
  swiglu_backward(a.gate.data(), a.up.data(), dh_.data(), n_ * c.ffn_dim, dgate_.data(), dup_.data());
  linear_backward(a.xn2.data(), p + w.w_gate, dgate_.data(), n_, c.dim, c.ffn_dim, dxn_.data(), false, g + w.w_gate,
                  (T*)nullptr, pool);
  linear_backward(a.xn2.data(), p + w.w_up, dup_.data(), n_, c.dim, c.ffn_dim, dxn_.data(), true, g + w.w_up,
                  (T*)nullptr, pool);
  rmsnorm_backward(a.x_mid.data(), p + w.ffn_norm, a.rstd2.data(), dxn_.data(), n_, c.dim, dx_.data(), g + w.ffn_norm,
                   pool);
}

// On entry dx_ is d(loss)/d(x_mid); on exit d(loss)/d(block input).
template <class T>
void TrainModel<T>::attention_block_backward(int l, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const ParamLayout::Layer& w = layout_.layers()[l];
  const T* p = params_.data();
  T* g = grads_.data();
  LayerActivations& a = acts_[l];
  linear_backward(a.att.data(), p + w.wo, dx_.data(), n_, c.q_dim(), c.dim, datt_.data(), false, g + w.wo, (T*)nullptr,
                  pool);
  attention_backward(a.q.data(), a.k.data(), a.v.data(), datt_.data(), seq_starts_, shape_, dq_.data(), dk_.data(),
                     dv_.data(), pool);
  rope_backward(dq_.data(), n_, c.n_heads, positions_.data(), rope_);
  rope_backward(dk_.data(), n_, c.n_kv_heads, positions_.data(), rope_);
  linear_backward(a.xn1.data(), p + w.wq, dq_.data(), n_, c.dim, c.q_dim(), dxn_.data(), false, g + w.wq, (T*)nullptr,
                  pool);
  linear_backward(a.xn1.data(), p + w.wk, dk_.data(), n_, c.dim, c.kv_dim(), dxn_.data(), true, g + w.wk, (T*)nullptr,
                  pool);
  linear_backward(a.xn1.data(), p + w.wv, dv_.data(), n_, c.dim, c.kv_dim(), dxn_.data(), true, g + w.wv, (T*)nullptr,
                  pool);
  rmsnorm_backward(a.x.data(), p + w.attn_norm, a.rstd1.data(), dxn_.data(), n_, c.dim, dx_.data(), g + w.attn_norm,
                   pool);
}

template class TrainModel<float>;
template class TrainModel<double>;

}  // namespace kvslim::train
