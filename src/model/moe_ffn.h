// The mixture-of-experts FFN: a router picks k of the layer's experts for each token, each picked
// expert is a gated FFN of its own, and the token's output is their weighted sum. Decode reads only
// the k picked experts' matrices; prefill groups a block's tokens by expert, so each expert's
// matrices go through one matrix-matrix product per block however many tokens picked it.
#pragma once

#include <cstdint>
#include <vector>

#include "model/moe_config.h"
#include "tensor/dtype.h"
#include "util/thread_pool.h"

namespace kvslim {

// One layer's experts: views into the mapped file (each expert is a contiguous slice of the 3-D
// ffn_*_exps tensors), biases converted to f32 (empty: none).
struct MoeWeights {
  WeightView router;                       // n_experts x dim (ffn_gate_inp)
  std::vector<float> router_bias;          // n_experts (ffn_gate_inp.bias)
  std::vector<WeightView> gate, up, down;  // per expert: ffn x dim, ffn x dim, dim x ffn
  std::vector<float> gate_bias, up_bias;   // [n_experts][ffn]
  std::vector<float> down_bias;            // [n_experts][dim]
};

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
  void run(const MoeWeights& w, const float* x, int n, float* out, ThreadPool& pool);
  // The same with every token run on its own (the decode path per token): the tests' yardstick
  // for the grouped path.
  void run_per_token(const MoeWeights& w, const float* x, int n, float* out, ThreadPool& pool);

 private:
  void route(const MoeWeights& w, const float* x, int n, ThreadPool& pool);
  void one_token(const MoeWeights& w, const float* x, int t, float* out, ThreadPool& pool);
  void grouped(const MoeWeights& w, const float* x, int n, float* out, ThreadPool& pool);

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
