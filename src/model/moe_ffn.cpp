#include "model/moe_ffn.h"

#include <algorithm>
#include <cmath>

#include "tensor/ops.h"
#include "util/error.h"

namespace kvslim {

namespace {

// Adds expert e's bias (rows of `width` in `bias`, empty: none) to n rows of y.
void add_expert_bias(const std::vector<float>& bias, int e, int width, float* y, int n) {
  if (bias.empty()) return;
  for (int i = 0; i < n; ++i) add_inplace(y + int64_t(i) * width, bias.data() + int64_t(e) * width, width);
}

}  // namespace

void route_token(const MoeConfig& moe, float* logits, int32_t* experts, float* weights) {
  const int n = moe.n_experts, k = moe.n_experts_used;
  // Softmax gating ranks the probabilities, softmax-weight the raw logits: the same order, as
  // softmax is monotonic, but the weights differ (all experts' softmax vs the k picked ones').
  if (moe.gating == MoeGating::Softmax) softmax_inplace(logits, n);
  // Top k, best first; ties go to the lower index (a stable order, as a sort by value would keep).
  thread_local std::vector<int32_t> idx;
  idx.resize(size_t(n));
  for (int i = 0; i < n; ++i) idx[size_t(i)] = i;
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  for (int j = 0; j < k; ++j) {
    experts[j] = idx[size_t(j)];
    weights[j] = logits[idx[size_t(j)]];
  }
  if (moe.gating == MoeGating::SoftmaxWeight) softmax_inplace(weights, k);
  if (moe.normalize_weights) {
    float sum = 0;
    for (int j = 0; j < k; ++j) sum += weights[j];
    sum = std::max(sum, 6.103515625e-5f);  // llama.cpp's clamp of the sum (2^-14)
    for (int j = 0; j < k; ++j) weights[j] /= sum;
  }
  if (moe.weights_scale != 1.0f && moe.weights_scale != 0.0f)
    for (int j = 0; j < k; ++j) weights[j] *= moe.weights_scale;
}

void moe_activation(const MoeConfig& moe, float* gate, const float* up, int64_t n) {
  if (moe.activation == MoeActivation::Swiglu) {
    swiglu(gate, up, gate, n);
    return;
  }
  // ggml's swiglu_oai: the gate is clamped above, the up projection on both sides and shifted by 1.
  const float alpha = moe.swiglu_alpha, limit = moe.swiglu_limit;
  for (int64_t i = 0; i < n; ++i) {
    const float x = std::min(gate[i], limit);
    const float y = std::clamp(up[i], -limit, limit);
    gate[i] = x / (1.0f + std::exp(-alpha * x)) * (y + 1.0f);
  }
}

MoeFfn::MoeFfn(const MoeConfig& moe, int dim, int max_block) : moe_(moe), dim_(dim), max_block_(max_block) {
  if (moe.n_experts < 1 || moe.n_experts_used < 1 || moe.n_experts_used > moe.n_experts || moe.expert_ffn_dim < 1)
    fail("mixture of experts: {} experts, {} used, width {} (need 1 <= used <= experts, width >= 1)", moe.n_experts,
         moe.n_experts_used, moe.expert_ffn_dim);
  const size_t b = size_t(max_block), k = size_t(moe.n_experts_used), f = size_t(moe.expert_ffn_dim);
  logits_.resize(b * moe.n_experts);
  chosen_.resize(b * k);
  weights_.resize(b * k);
  count_.resize(size_t(moe.n_experts));
  offset_.resize(size_t(moe.n_experts) + 1);
  order_.resize(b * k);
  const size_t rows = std::max(b, k);  // the grouped path's rows of one expert, decode's k experts
  xg_.resize(b * dim);
  gate_.resize(rows * f);
  up_.resize(rows * f);
  down_.resize(rows * dim);
}

void MoeFfn::route(const MoeWeights& w, const float* x, int n, ThreadPool& pool) {
  const int k = moe_.n_experts_used;
  matmul(w.router, x, n, logits_.data(), pool);
  for (int t = 0; t < n; ++t) {
    float* logits = &logits_[size_t(t) * moe_.n_experts];
    if (!w.router_bias.empty()) add_inplace(logits, w.router_bias.data(), moe_.n_experts);
    route_token(moe_, logits, &chosen_[size_t(t) * k], &weights_[size_t(t) * k]);
  }
}

void MoeFfn::run(const MoeWeights& w, const float* x, int n, float* out, ThreadPool& pool, const LoraAdapter* lora,
                 int layer) {
  if (n < 1 || n > max_block_) fail("mixture of experts: block of {} rows outside [1, {}]", n, max_block_);
  lora_ = lora;
  layer_ = layer;
  route(w, x, n, pool);
  if (n == 1) {
    one_token(w, x, 0, out, pool);
  } else {
    grouped(w, x, n, out, pool);
  }
}

void MoeFfn::run_per_token(const MoeWeights& w, const float* x, int n, float* out, ThreadPool& pool) {
  if (n < 1 || n > max_block_) fail("mixture of experts: block of {} rows outside [1, {}]", n, max_block_);
  lora_ = nullptr;
  route(w, x, n, pool);
  for (int t = 0; t < n; ++t) one_token(w, x + int64_t(t) * dim_, t, out + int64_t(t) * dim_, pool);
}

// Decode: the k experts' gate and up rows in one pool dispatch (they all read x), then each
// expert's down projection, summed in the router's order (best first) as llama.cpp adds them.
void MoeFfn::one_token(const MoeWeights& w, const float* x, int t, float* out, ThreadPool& pool) {
  const int k = moe_.n_experts_used, f = moe_.expert_ffn_dim;
  const int32_t* experts = &chosen_[size_t(t) * k];
  const float* weights = &weights_[size_t(t) * k];
  thread_local std::vector<WeightView> views;
  thread_local std::vector<float*> ys;
  views.clear();
  ys.clear();
  for (int j = 0; j < k; ++j) {
    views.push_back(w.gate[size_t(experts[j])]);
    views.push_back(w.up[size_t(experts[j])]);
    ys.push_back(&gate_[size_t(j) * f]);
    ys.push_back(&up_[size_t(j) * f]);
  }
  matvec_multi(views, x, ys, pool);
  for (int j = 0; j < k; ++j) {
    add_lora(LoraSite::Gate, x, 1, &gate_[size_t(j) * f], pool);
    add_lora(LoraSite::Up, x, 1, &up_[size_t(j) * f], pool);
    add_expert_bias(w.gate_bias, experts[j], f, &gate_[size_t(j) * f], 1);
    add_expert_bias(w.up_bias, experts[j], f, &up_[size_t(j) * f], 1);
  }
  moe_activation(moe_, gate_.data(), up_.data(), int64_t(k) * f);
  for (int j = 0; j < k; ++j) {
    float* y = &down_[size_t(j) * dim_];
    matvec(w.down[size_t(experts[j])], &gate_[size_t(j) * f], y, pool);
    add_lora(LoraSite::Down, &gate_[size_t(j) * f], 1, y, pool);
    add_expert_bias(w.down_bias, experts[j], dim_, y, 1);
  }
  for (int i = 0; i < dim_; ++i) out[i] = weights[0] * down_[size_t(i)];
  for (int j = 1; j < k; ++j) axpy(weights[j], &down_[size_t(j) * dim_], out, dim_);
}

// Prefill: the block's (token, slot) pairs sorted by expert (a counting sort, tokens ascending
// within an expert); each expert used by the block gathers its rows, runs its three products over
// them at once, and adds its weighted output to each of those tokens.
void MoeFfn::grouped(const MoeWeights& w, const float* x, int n, float* out, ThreadPool& pool) {
  const int k = moe_.n_experts_used, f = moe_.expert_ffn_dim, n_exp = moe_.n_experts;
  std::fill(count_.begin(), count_.end(), 0);
  for (int i = 0; i < n * k; ++i) ++count_[size_t(chosen_[size_t(i)])];
  offset_[0] = 0;
  for (int e = 0; e < n_exp; ++e) offset_[size_t(e) + 1] = offset_[size_t(e)] + count_[size_t(e)];
  std::fill(count_.begin(), count_.end(), 0);
  for (int i = 0; i < n * k; ++i) {
    const int e = chosen_[size_t(i)];
    order_[size_t(offset_[size_t(e)] + count_[size_t(e)]++)] = i;
  }
  std::fill(out, out + int64_t(n) * dim_, 0.0f);
  for (int e = 0; e < n_exp; ++e) {
    const int rows = count_[size_t(e)];
    if (rows == 0) continue;
    const int32_t* pairs = &order_[size_t(offset_[size_t(e)])];
    for (int r = 0; r < rows; ++r) std::copy_n(x + int64_t(pairs[r] / k) * dim_, dim_, &xg_[size_t(r) * dim_]);
    matmul(w.gate[size_t(e)], xg_.data(), rows, gate_.data(), pool);
    matmul(w.up[size_t(e)], xg_.data(), rows, up_.data(), pool);
    add_lora(LoraSite::Gate, xg_.data(), rows, gate_.data(), pool);
    add_lora(LoraSite::Up, xg_.data(), rows, up_.data(), pool);
    add_expert_bias(w.gate_bias, e, f, gate_.data(), rows);
    add_expert_bias(w.up_bias, e, f, up_.data(), rows);
    moe_activation(moe_, gate_.data(), up_.data(), int64_t(rows) * f);
    matmul(w.down[size_t(e)], gate_.data(), rows, down_.data(), pool);
    add_lora(LoraSite::Down, gate_.data(), rows, down_.data(), pool);
    add_expert_bias(w.down_bias, e, dim_, down_.data(), rows);
    for (int r = 0; r < rows; ++r)
      axpy(weights_[size_t(pairs[r])], &down_[size_t(r) * dim_], out + int64_t(pairs[r] / k) * dim_, dim_);
  }
}

}  // namespace kvslim
