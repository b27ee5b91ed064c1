#include "lookahead/objective.h"

#include <algorithm>
#include <cmath>

#include "train/grad_ops.h"
#include "train/softmax_row.h"
#include "util/error.h"

namespace kvslim {

using train::gemm;

namespace {

// RoPE of m rows at positions pos0 .. pos0+m-1, by +theta (sign 1) or -theta (sign -1, the
// backward: the rotation is orthogonal, and its attn_factor scale symmetric). The same angles,
// pairing and factors as the inference kernel rope_inplace (tensor/ops.h).
template <class T>
void rotate_rows(T* x, int m, int n_heads, int64_t pos0, const RopeConfig& c, int sign) {
  const int half = c.n_rot / 2;
  std::vector<T> cs(half), sn(half);
  for (int t = 0; t < m; ++t) {
    for (int i = 0; i < half; ++i) {
      double theta = double(pos0 + t) * std::pow(double(c.base), -2.0 * i / c.n_rot);
      if (c.freq_factors) theta /= double(c.freq_factors[i]);
      cs[i] = T(std::cos(theta) * c.attn_factor);
      sn[i] = T(sign * std::sin(theta) * c.attn_factor);
    }
    for (int h = 0; h < n_heads; ++h) {
      T* v = x + (int64_t(t) * n_heads + h) * c.head_dim;
      const int stride = c.neox ? 1 : 2, offset = c.neox ? half : 1;
      for (int i = 0; i < half; ++i) {
        T& a = v[i * stride];
        T& b = v[i * stride + offset];
        const T a0 = a, b0 = b;
        a = a0 * cs[i] - b0 * sn[i];
        b = a0 * sn[i] + b0 * cs[i];
      }
    }
  }
}

}  // namespace

template <class T>
double kl_to_normalized(const T* truth, const T* w, int64_t n, T* d_w) {
  double z = 0, mass = 0;
  for (int64_t j = 0; j < n; ++j) {
    z += double(w[j]);
    mass += double(truth[j]);
  }
  double kl = 0;
  for (int64_t j = 0; j < n; ++j) {
    if (truth[j] > 0) kl += double(truth[j]) * std::log(double(truth[j]) * z / double(w[j]));
    // d/dw_j of sum_i t_i (log t_i - log w_i + log z) = -t_j / w_j + mass / z.
    if (d_w) d_w[j] = T(mass / z - double(truth[j]) / double(w[j]));
  }
  return kl;
}

template <class T>
LookaheadObjective<T>::LookaheadObjective(const FrozenModel<T>& base, int n_lookahead, const LoraLayout& lora,
                                          T lora_scale)
    : base_(base), m_(n_lookahead), lora_(lora), scale_(lora_scale), acts_(base.config.n_layers) {
  if (n_lookahead < 1) fail("lookahead rows must be >= 1 (got {})", n_lookahead);
  if (!lora.fits(base.config)) fail("the LoRA layout does not fit the base model");
}

template <class T>
const T* LookaheadObjective<T>::prompt_attention(int layer, int q_head) const {
  return &sums_[(size_t(layer) * base_.config.n_heads + q_head) * n_];
}

// y = x W^T + b + scale * (x A^T) B^T, keeping u = x A^T for the backward.
template <class T>
void LookaheadObjective<T>::project(int l, LoraSite site, const T* params, const T* x, const T* bias, T* y,
                                    ThreadPool& pool) {
  const int in = lora_.in(site), out = lora_.out(site), r = lora_.rank();
  const T* lora = params + embd_size();
  std::vector<T>& u = acts_[l].u[int(site)];
  u.resize(size_t(m_) * r);
  train::linear_forward(x, base_.layers[l].w[int(site)].data(), bias, m_, in, out, y, pool);
  gemm<T>(false, true, m_, r, in, T(1), x, in, lora + lora_.a_offset(l, site), in, T(0), u.data(), r);
  gemm<T>(false, true, m_, out, r, scale_, u.data(), r, lora + lora_.b_offset(l, site), r, T(1), y, out);
}

// Given dy: dx += dy W + scale * (dy B) A; dB += scale * dy^T u; dA += scale * (dy B)^T x.
template <class T>
void LookaheadObjective<T>::project_backward(int l, LoraSite site, const T* params, const T* x, const T* dy, T* dx,
                                             T* grads, ThreadPool& pool) {
  const int in = lora_.in(site), out = lora_.out(site), r = lora_.rank();
  const T* a = params + embd_size() + lora_.a_offset(l, site);
  const T* b = params + embd_size() + lora_.b_offset(l, site);
  T* da = grads + embd_size() + lora_.a_offset(l, site);
  T* db = grads + embd_size() + lora_.b_offset(l, site);
  const T* w = base_.layers[l].w[int(site)].data();
  pool.parallel_for_fn(
      m_,
      [&](int64_t t0, int64_t t1) {
        gemm<T>(false, false, t1 - t0, in, out, T(1), dy + t0 * out, out, w, in, T(1), dx + t0 * in, in);
      },
      8);
  std::vector<T> dyb(size_t(m_) * r);
  gemm<T>(false, false, m_, r, out, T(1), dy, out, b, r, T(0), dyb.data(), r);
  gemm<T>(true, false, out, r, m_, scale_, dy, out, acts_[l].u[int(site)].data(), r, T(1), db, r);
  gemm<T>(true, false, r, in, m_, scale_, dyb.data(), r, x, in, T(1), da, in);
  gemm<T>(false, false, m_, in, r, scale_, dyb.data(), r, a, in, T(1), dx, in);
}

template <class T>
void LookaheadObjective<T>::forward_layer(int l, const T* params, const PromptTarget<T>& target, ThreadPool& pool) {
  const ModelConfig& c = base_.config;
  const FrozenLayer<T>& w = base_.layers[l];
  LayerActs& a = acts_[l];
  const int m = m_, hd = c.head_dim, qd = c.q_dim(), kvd = c.kv_dim(), group = c.group_size();
  const int64_t n = n_, keys = n + m;
  const T eps = T(c.rms_eps);
  auto sized = [](std::vector<T>& v, size_t size) -> T* {
    v.resize(size);
    return v.data();
  };
  sized(a.rstd1, m);
  train::rmsnorm_forward(a.x.data(), w.attn_norm.data(), m, c.dim, eps, sized(a.xn1, size_t(m) * c.dim), a.rstd1.data(),
                         pool);
  const bool qk_norm = !w.q_norm.empty();
  T* q = sized(a.q, size_t(m) * qd);
  T* k = sized(a.k, size_t(m) * kvd);
  project(l, LoraSite::Q, params, a.xn1.data(), w.bq.empty() ? nullptr : w.bq.data(),
          qk_norm ? sized(a.q_pre, a.q.size()) : q, pool);
  project(l, LoraSite::K, params, a.xn1.data(), w.bk.empty() ? nullptr : w.bk.data(),
          qk_norm ? sized(a.k_pre, a.k.size()) : k, pool);
  project(l, LoraSite::V, params, a.xn1.data(), w.bv.empty() ? nullptr : w.bv.data(), sized(a.v, size_t(m) * kvd),
          pool);
  if (qk_norm) {
    train::rmsnorm_forward(a.q_pre.data(), w.q_norm.data(), int64_t(m) * c.n_heads, hd, eps, q,
                           sized(a.q_rstd, size_t(m) * c.n_heads), pool);
    train::rmsnorm_forward(a.k_pre.data(), w.k_norm.data(), int64_t(m) * c.n_kv_heads, hd, eps, k,
                           sized(a.k_rstd, size_t(m) * c.n_kv_heads), pool);
  }
  if (c.layer_has_rope(l)) {  // SmolLM3's NoPE layers leave q and k as projected
    rotate_rows(q, m, c.n_heads, n, base_.rope, 1);
    rotate_rows(k, m, c.n_kv_heads, n, base_.rope, 1);
  }

  // Each KV head's keys and values: the prompt's, then the lookahead rows'.
  sized(a.kv_keys, size_t(c.n_kv_heads) * keys * hd);
  sized(a.kv_values, size_t(c.n_kv_heads) * keys * hd);
  sized(a.probs, size_t(c.n_heads) * m * keys);
  sized(a.att, size_t(m) * qd);
  const T scale = T(1) / std::sqrt(T(hd));
  pool.parallel_for_fn(c.n_kv_heads, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      const size_t prompt_offset = (size_t(l) * c.n_kv_heads + g) * n * hd;
      T* kk = &a.kv_keys[size_t(g) * keys * hd];
      T* vv = &a.kv_values[size_t(g) * keys * hd];
      std::copy_n(&target.keys[prompt_offset], n * hd, kk);
      std::copy_n(&target.values[prompt_offset], n * hd, vv);
      for (int t = 0; t < m; ++t) {
        std::copy_n(k + int64_t(t) * kvd + g * hd, hd, kk + (n + t) * hd);
        std::copy_n(a.v.data() + int64_t(t) * kvd + g * hd, hd, vv + (n + t) * hd);
      }
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        T* p = &a.probs[size_t(h) * m * keys];
        gemm<T>(false, true, m, keys, hd, scale, q + h * hd, qd, kk, hd, T(0), p, keys);
        for (int t = 0; t < m; ++t) {
          T* row = p + int64_t(t) * keys;
          const int64_t visible = n + t + 1;
          train::softmax_row(row, visible);
          std::fill(row + visible, row + keys, T(0));
        }
        gemm<T>(false, false, m, hd, keys, T(1), p, keys, vv, hd, T(0), a.att.data() + h * hd, qd);
        T* sums = &sums_[(size_t(l) * c.n_heads + h) * n];
        std::fill_n(sums, n, T(0));
        for (int t = 0; t < m; ++t)
          for (int64_t j = 0; j < n; ++j) sums[j] += p[int64_t(t) * keys + j];
      }
    }
  });
  if (l + 1 == c.n_layers) return;  // nothing after the last attention reaches the loss

  // x_mid = x + o; next x = x_mid + down(swiglu(gate, up)).
  T* x_mid = sized(a.x_mid, size_t(m) * c.dim);
  project(l, LoraSite::O, params, a.att.data(), nullptr, x_mid, pool);
  for (size_t i = 0; i < a.x_mid.size(); ++i) x_mid[i] += a.x[i];
  sized(a.rstd2, m);
  train::rmsnorm_forward(x_mid, w.ffn_norm.data(), m, c.dim, eps, sized(a.xn2, size_t(m) * c.dim), a.rstd2.data(),
                         pool);
  project(l, LoraSite::Gate, params, a.xn2.data(), nullptr, sized(a.gate, size_t(m) * c.ffn_dim), pool);
  project(l, LoraSite::Up, params, a.xn2.data(), nullptr, sized(a.up, size_t(m) * c.ffn_dim), pool);
  train::swiglu_forward(a.gate.data(), a.up.data(), int64_t(m) * c.ffn_dim, sized(a.h, size_t(m) * c.ffn_dim));
  std::vector<T>& next = acts_[l + 1].x;
  next.resize(size_t(m) * c.dim);
  project(l, LoraSite::Down, params, a.h.data(), nullptr, next.data(), pool);
  for (size_t i = 0; i < next.size(); ++i) next[i] += x_mid[i];
}

// Through the softmax of every query head of layer l: d_att is the gradient of the heads'
// outputs, d_sums that of the summed prompt attention ([q head][n], from the loss). Writes the
// gradients of the (rotated) lookahead queries, keys and values.
template <class T>
void LookaheadObjective<T>::attention_backward(int l, const std::vector<T>& d_att, const std::vector<T>& d_sums,
                                               std::vector<T>& dq, std::vector<T>& dk, std::vector<T>& dv,
                                               ThreadPool& pool) {
  const ModelConfig& c = base_.config;
  const LayerActs& a = acts_[l];
  const int m = m_, hd = c.head_dim, qd = c.q_dim(), kvd = c.kv_dim(), group = c.group_size();
  const int64_t n = n_, keys = n + m;
  const T scale = T(1) / std::sqrt(T(hd));
  std::fill(dk.begin(), dk.end(), T(0));
  std::fill(dv.begin(), dv.end(), T(0));
  pool.parallel_for_fn(c.n_kv_heads, [&](int64_t g0, int64_t g1) {
    std::vector<T> ds(size_t(m) * keys);
    for (int64_t g = g0; g < g1; ++g) {
      const T* kk = &a.kv_keys[size_t(g) * keys * hd];
      const T* vv = &a.kv_values[size_t(g) * keys * hd];
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        const T* p = &a.probs[size_t(h) * m * keys];
        const T* doh = d_att.data() + h * hd;
        // dP = dO V^T, plus the loss's gradient on the prompt columns; then dS = P (dP - rowsum(P dP)).
        gemm<T>(false, true, m, keys, hd, T(1), doh, qd, vv, hd, T(0), ds.data(), keys);
        const T* dsum = &d_sums[size_t(h) * n];
        for (int t = 0; t < m; ++t) {
          T* row = ds.data() + int64_t(t) * keys;
          const T* pr = p + int64_t(t) * keys;
          for (int64_t j = 0; j < n; ++j) row[j] += dsum[j];
          T dot = 0;
          for (int64_t j = 0; j < keys; ++j) dot += pr[j] * row[j];
          for (int64_t j = 0; j < keys; ++j) row[j] = pr[j] * (row[j] - dot);
        }
        gemm<T>(false, false, m, hd, keys, scale, ds.data(), keys, kk, hd, T(0), dq.data() + h * hd, qd);
        gemm<T>(true, false, m, hd, m, scale, ds.data() + n, keys, a.q.data() + h * hd, qd, T(1), dk.data() + g * hd,
                kvd);
        gemm<T>(true, false, m, hd, m, T(1), p + n, keys, doh, qd, T(1), dv.data() + g * hd, kvd);
      }
    }
  });
}

template <class T>
double LookaheadObjective<T>::evaluate(const T* params, const PromptTarget<T>& target, T* grads, ThreadPool& pool) {
  const ModelConfig& c = base_.config;
  const int L = c.n_layers, H = c.n_heads, m = m_, dim = c.dim;
  n_ = target.n;
  if (n_ < 1) fail("lookahead objective: empty prompt");
  const size_t kv_size = size_t(L) * c.n_kv_heads * n_ * c.head_dim;
  if (target.keys.size() != kv_size || target.values.size() != kv_size ||
      target.importance.size() != size_t(L) * H * n_)
    fail("lookahead objective: the prompt target's sizes do not match a {}-token prompt", n_);
  sums_.resize(size_t(L) * H * n_);
  acts_[0].x.assign(params, params + embd_size());
  for (int l = 0; l < L; ++l) forward_layer(l, params, target, pool);

  // Loss and its gradient with respect to the summed prompt attention of each head.
  const T weight = T(1) / T(L * H);
  std::vector<T> d_sums(grads ? sums_.size() : 0);
  double loss = 0;
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      const size_t off = (size_t(l) * H + h) * n_;
      loss += kl_to_normalized(&target.importance[off], &sums_[off], n_, grads ? &d_sums[off] : nullptr);
    }
  loss *= double(weight);
  if (!grads) return loss;
  for (T& d : d_sums) d *= weight;

  const int qd = c.q_dim(), kvd = c.kv_dim(), ffn = c.ffn_dim;
  std::vector<T> dx(size_t(m) * dim, T(0)), dx_mid, d_att(size_t(m) * qd), dq(size_t(m) * qd), dk(size_t(m) * kvd),
      dv(size_t(m) * kvd), dxn(size_t(m) * dim), dh, dgate, dup, dq_pre, dk_pre, scratch;
  for (int l = L - 1; l >= 0; --l) {
    const LayerActs& a = acts_[l];
    const FrozenLayer<T>& w = base_.layers[l];
    std::fill(d_att.begin(), d_att.end(), T(0));
    if (l + 1 < L) {
      // dx holds the gradient of this layer's output: back through the FFN and the output projection.
      dx_mid = dx;
      dh.assign(size_t(m) * ffn, T(0));
      project_backward(l, LoraSite::Down, params, a.h.data(), dx.data(), dh.data(), grads, pool);
      dgate.resize(dh.size());
      dup.resize(dh.size());
      train::swiglu_backward(a.gate.data(), a.up.data(), dh.data(), int64_t(m) * ffn, dgate.data(), dup.data());
      std::fill(dxn.begin(), dxn.end(), T(0));
      project_backward(l, LoraSite::Gate, params, a.xn2.data(), dgate.data(), dxn.data(), grads, pool);
      project_backward(l, LoraSite::Up, params, a.xn2.data(), dup.data(), dxn.data(), grads, pool);
      scratch.assign(dim, T(0));
      train::rmsnorm_backward(a.x_mid.data(), w.ffn_norm.data(), a.rstd2.data(), dxn.data(), m, dim, dx_mid.data(),
                              scratch.data(), pool);
      project_backward(l, LoraSite::O, params, a.att.data(), dx_mid.data(), d_att.data(), grads, pool);
      dx = dx_mid;
    }
    attention_backward(l, d_att,
                       std::vector<T>(d_sums.begin() + size_t(l) * H * n_, d_sums.begin() + size_t(l + 1) * H * n_), dq,
                       dk, dv, pool);
    if (c.layer_has_rope(l)) {
      rotate_rows(dq.data(), m, H, n_, base_.rope, -1);
      rotate_rows(dk.data(), m, c.n_kv_heads, n_, base_.rope, -1);
    }
    if (!w.q_norm.empty()) {
      dq_pre.assign(dq.size(), T(0));
      dk_pre.assign(dk.size(), T(0));
      scratch.assign(c.head_dim, T(0));
      train::rmsnorm_backward(a.q_pre.data(), w.q_norm.data(), a.q_rstd.data(), dq.data(), int64_t(m) * H, c.head_dim,
                              dq_pre.data(), scratch.data(), pool);
      train::rmsnorm_backward(a.k_pre.data(), w.k_norm.data(), a.k_rstd.data(), dk.data(), int64_t(m) * c.n_kv_heads,
                              c.head_dim, dk_pre.data(), scratch.data(), pool);
      dq.swap(dq_pre);
      dk.swap(dk_pre);
    }
    std::fill(dxn.begin(), dxn.end(), T(0));
    project_backward(l, LoraSite::Q, params, a.xn1.data(), dq.data(), dxn.data(), grads, pool);
    project_backward(l, LoraSite::K, params, a.xn1.data(), dk.data(), dxn.data(), grads, pool);
    project_backward(l, LoraSite::V, params, a.xn1.data(), dv.data(), dxn.data(), grads, pool);
    scratch.assign(dim, T(0));
    train::rmsnorm_backward(a.x.data(), w.attn_norm.data(), a.rstd1.data(), dxn.data(), m, dim, dx.data(),
                            scratch.data(), pool);
  }
  for (int64_t i = 0; i < embd_size(); ++i) grads[i] += dx[i];
  return loss;
}

template double kl_to_normalized<float>(const float*, const float*, int64_t, float*);
template double kl_to_normalized<double>(const double*, const double*, int64_t, double*);
template class LookaheadObjective<float>;
template class LookaheadObjective<double>;

}  // namespace kvslim
