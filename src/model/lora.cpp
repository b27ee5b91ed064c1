#include "model/lora.h"

#include "tensor/ops.h"
#include "util/error.h"

namespace kvslim {

const char* lora_site_name(LoraSite site) {
  static const char* const names[kLoraSites] = {"attn_q",   "attn_k", "attn_v",  "attn_output",
                                                "ffn_gate", "ffn_up", "ffn_down"};
  return names[int(site)];
}

int lora_site_in(const ModelConfig& c, LoraSite site) {
  switch (site) {
    case LoraSite::O: return c.q_dim();
    case LoraSite::Down: return c.is_moe() ? c.moe.expert_ffn_dim : c.ffn_dim;
    default: return c.dim;
  }
}

int lora_site_out(const ModelConfig& c, LoraSite site) {
  switch (site) {
    case LoraSite::Q: return c.q_dim();
    case LoraSite::K:
    case LoraSite::V: return c.kv_dim();
    case LoraSite::Gate:
    case LoraSite::Up: return c.is_moe() ? c.moe.expert_ffn_dim : c.ffn_dim;
    default: return c.dim;
  }
}

LoraLayout::LoraLayout(const ModelConfig& config, int rank) : rank_(rank), n_layers_(config.n_layers) {
  if (rank < 1) fail("LoRA rank must be >= 1 (got {})", rank);
  for (LoraSite site : kAllLoraSites) {
    const int s = int(site);
    in_[s] = lora_site_in(config, site);
    out_[s] = lora_site_out(config, site);
    site_offset_[s] = layer_size_;
    layer_size_ += int64_t(rank) * (in_[s] + out_[s]);
  }
}

bool LoraLayout::fits(const ModelConfig& config) const {
  if (n_layers_ != config.n_layers) return false;
  for (LoraSite site : kAllLoraSites)
    if (in(site) != lora_site_in(config, site) || out(site) != lora_site_out(config, site)) return false;
  return true;
}

LoraAdapter::LoraAdapter(const ModelConfig& config, int rank, float alpha) : layout_(config, rank), alpha_(alpha) {
  if (!(alpha > 0)) fail("LoRA alpha must be > 0 (got {})", alpha);
  params_.assign(size_t(layout_.size()), 0.0f);
}

void LoraAdapter::apply(int layer, LoraSite site, const float* x, int n, float* y, ThreadPool& pool) const {
  // A and B as f32 weight matrices, so the projections' own kernels do the two products.
  const WeightView a_view{DType::F32, a(layer, site), rank(), in(site)};
  const WeightView b_view{DType::F32, b(layer, site), out(site), rank()};
  std::vector<float> ax(size_t(n) * rank()), bax(size_t(n) * out(site));
  matmul(a_view, x, n, ax.data(), pool);
  matmul(b_view, ax.data(), n, bax.data(), pool);
  axpy(scale(), bax.data(), y, int64_t(n) * out(site));
}

}  // namespace kvslim
