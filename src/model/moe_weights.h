// A mixture-of-experts layer's weights as the loaded model holds them (model/moe_ffn.h runs them).
#pragma once

#include <vector>

#include "tensor/dtype.h"

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

}  // namespace kvslim
