// Low-rank adapters (LoRA, Hu et al. 2021) on the seven projections of every layer: q, k, v, o,
// gate, up and down. A site with `in` inputs and `out` outputs adds scale * B (A x) to its
// output, A [rank][in] and B [out][rank] row-major f32, scale = alpha / rank. Forward::run_rows
// applies them to the rows it is given only (LookaheadKV's selectively activated LoRA); the
// plain token path never sees an adapter. On a mixture-of-experts model the gate, up and down
// sites are one low-rank term shared by every expert (each picked expert's projection gets it).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/config.h"
#include "util/thread_pool.h"

namespace kvslim {

enum class LoraSite : int { Q, K, V, O, Gate, Up, Down };
inline constexpr int kLoraSites = 7;
inline constexpr LoraSite kAllLoraSites[kLoraSites] = {LoraSite::Q,    LoraSite::K,  LoraSite::V,   LoraSite::O,
                                                       LoraSite::Gate, LoraSite::Up, LoraSite::Down};

// The base tensor's stem: attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down.
const char* lora_site_name(LoraSite site);
// Inputs and outputs of the projection a site adapts.
int lora_site_in(const ModelConfig& config, LoraSite site);
int lora_site_out(const ModelConfig& config, LoraSite site);

// Where each layer's A and B live in one flat buffer (layer-major, then site, A before B), so
// that an optimiser and a gradient can run over one array with the same layout.
class LoraLayout {
 public:
  LoraLayout() = default;
  LoraLayout(const ModelConfig& config, int rank);

  int rank() const { return rank_; }
  int n_layers() const { return n_layers_; }
  int in(LoraSite site) const { return in_[int(site)]; }
  int out(LoraSite site) const { return out_[int(site)]; }
  int64_t a_offset(int layer, LoraSite site) const { return layer_size_ * layer + site_offset_[int(site)]; }
  int64_t b_offset(int layer, LoraSite site) const { return a_offset(layer, site) + int64_t(rank_) * in(site); }
  int64_t size() const { return layer_size_ * n_layers_; }
  // Same layer count and projection widths as the model.
  bool fits(const ModelConfig& config) const;

 private:
  int rank_ = 0, n_layers_ = 0;
  int in_[kLoraSites] = {}, out_[kLoraSites] = {};
  int64_t site_offset_[kLoraSites] = {}, layer_size_ = 0;
};

class LoraAdapter {
 public:
  LoraAdapter() = default;
  // All A and B zero.
  LoraAdapter(const ModelConfig& config, int rank, float alpha);

  const LoraLayout& layout() const { return layout_; }
  int rank() const { return layout_.rank(); }
  float alpha() const { return alpha_; }
  float scale() const { return alpha_ / float(layout_.rank()); }
  int n_layers() const { return layout_.n_layers(); }
  int in(LoraSite site) const { return layout_.in(site); }
  int out(LoraSite site) const { return layout_.out(site); }
  bool fits(const ModelConfig& config) const { return layout_.fits(config); }

  float* a(int layer, LoraSite site) { return &params_[layout_.a_offset(layer, site)]; }
  float* b(int layer, LoraSite site) { return &params_[layout_.b_offset(layer, site)]; }
  const float* a(int layer, LoraSite site) const { return &params_[layout_.a_offset(layer, site)]; }
  const float* b(int layer, LoraSite site) const { return &params_[layout_.b_offset(layer, site)]; }
  std::span<float> params() { return params_; }
  std::span<const float> params() const { return params_; }

  // y[t] += scale * B A x[t] for the n rows of x ([n][in]) and y ([n][out]).
  void apply(int layer, LoraSite site, const float* x, int n, float* y, ThreadPool& pool) const;

 private:
  LoraLayout layout_;
  float alpha_ = 0;
  std::vector<float> params_;
};

}  // namespace kvslim
