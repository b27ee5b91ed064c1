// The mixture-of-experts FFN: a router picks k of the layer's experts for each token, each picked
// expert is a gated FFN of its own, and the token's output is their weighted sum. Decode reads only
// the k picked experts' matrices; prefill groups a block's tokens by expert, so each expert's
// matrices go through one matrix-matrix product per block however many tokens picked it.
#pragma once

#include <cstdint>
#include <vector>

#include "model/lora.h"
#include "model/moe_config.h"
#include "model/moe_weights.h"
#include "util/thread_pool.h"

namespace kvslim {

// Routing of one token: its router logits (n_experts floats, overwritten as scratch) become the
// k experts it uses, best first, and their mixing weights, as the config's gating defines.
void route_token(const MoeConfig& moe, float* logits, int32_t* experts, float* weights);

// The expert activation in place: gate[i] = act(gate[i], up[i]) for n values.
void moe_activation(const MoeConfig& moe, float* gate, const float* up, int64_t n);

class MoeFfn {
 public:
  MoeFfn(const MoeConfig& moe, int dim, int max_block);

  // out[t] = sum over the k experts e of token t: w_te * expert_e(x[t]), for the n rows of x
  // ([n][dim]); out ([n][dim]) is overwritten. One token takes the decode path, more the grouped one.
  // `lora` (may be null) adds its gate, up and down terms of `layer` to every picked expert's.
  void run(const MoeWeights& w, const float* x, int n, float* out, ThreadPool& pool, const LoraAdapter* lora = nullptr,
           int layer = 0);
  // The same with every token run on its own (the decode path per token): the tests' yardstick
  // for the grouped path.
  void run_per_token(const MoeWeights& w, const float* x, int n, float* out, ThreadPool& pool);

 private:
  void route(const MoeWeights& w, const float* x, int n, ThreadPool& pool);
  void one_token(const MoeWeights& w, const float* x, int t, float* out, ThreadPool& pool);
  void grouped(const MoeWeights& w, const float* x, int n, float* out, ThreadPool& pool);
  // The adapter's term at `site` added to n rows of y computed from the n rows of x.
  void add_lora(LoraSite site, const float* x, int n, float* y, ThreadPool& pool) const {
    if (lora_) lora_->apply(layer_, site, x, n, y, pool);
  }

  const LoraAdapter* lora_ = nullptr;  // of the current run() only
  int layer_ = 0;

  MoeConfig moe_;
  int dim_;
  int max_block_;
  std::vector<float> logits_;    // [max_block][n_experts]
  std::vector<int32_t> chosen_;  // [max_block][k]
  std::vector<float> weights_;   // [max_block][k]
  // Grouped path: per expert, the (token, slot) pairs routed to it; gathered rows and products.
  std::vector<int32_t> count_, offset_, order_;
  std::vector<float> xg_, gate_, up_, down_;
};

}  // namespace kvslim
