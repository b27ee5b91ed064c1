#include "lookahead/frozen_model.h"

#include "util/error.h"

namespace kvslim {

namespace {

template <class T>
std::vector<T> converted(const std::vector<float>& v) {
  return std::vector<T>(v.begin(), v.end());
}

template <class T>
std::vector<T> converted(const WeightView& w) {
  std::vector<T> out(size_t(w.rows) * w.cols);
  std::vector<float> row(w.cols);
  for (int64_t r = 0; r < w.rows; ++r) {
    convert_to_f32(w.type, w.row(r), row.data(), w.cols);
    std::copy(row.begin(), row.end(), out.begin() + r * w.cols);
  }
  return out;
}

}  // namespace

template <class T>
FrozenModel<T>::FrozenModel(const Model& model) : config(model.config()) {
  // The training forward has llama/qwen2/qwen3's blocks only (no post norms, GELU or windows).
  if (config.is_gemma3()) fail("LookaheadKV training supports llama, qwen2 and qwen3 models, not gemma3");
  if (config.is_moe())
    fail("LookaheadKV training supports llama, qwen2 and qwen3 models, not {}", arch_name(config.arch));
  rope.head_dim = config.head_dim;
  rope.n_rot = config.n_rot;
  rope.base = config.rope_base;
  rope.neox = config.rope_neox();
  const std::vector<float>& factors = model.rope_factors(0);
  rope.freq_factors = factors.empty() ? nullptr : factors.data();
  rope.attn_factor = config.rope_attn_factor;
  for (const LayerWeights& w : model.layers()) {
    FrozenLayer<T> l;
    l.attn_norm = converted<T>(w.attn_norm);
    l.ffn_norm = converted<T>(w.ffn_norm);
    l.bq = converted<T>(w.bq);
    l.bk = converted<T>(w.bk);
    l.bv = converted<T>(w.bv);
    l.q_norm = converted<T>(w.q_norm);
    l.k_norm = converted<T>(w.k_norm);
    const WeightView* views[kLoraSites] = {&w.wq, &w.wk, &w.wv, &w.wo, &w.w_gate, &w.w_up, &w.w_down};
    for (int s = 0; s < kLoraSites; ++s) l.w[s] = converted<T>(*views[s]);
    layers.push_back(std::move(l));
  }
}

template struct FrozenModel<float>;
template struct FrozenModel<double>;

}  // namespace kvslim
