// The mixture-of-experts FFN's hyper-parameters: how many experts, how many a token uses, how the
// router's logits become the mixing weights, and the experts' activation. Read from the
// `{arch}.expert_*` keys; what llama.cpp fixes per architecture rather than reading (the gating
// function, the renormalisation) is set by the caller from the architecture.
#pragma once

#include <string>

#include "gguf/gguf.h"

namespace kvslim {

// Values as llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE numbers them (`{arch}.expert_gating_func`).
enum class MoeGating {
  Softmax = 1,        // probabilities = softmax over all experts' logits; the top k's are the weights
  SoftmaxWeight = 3,  // top k of the raw logits; their softmax (over the k only) is the weights (gpt-oss)
};
const char* moe_gating_name(MoeGating gating);

enum class MoeActivation {
  Swiglu,     // silu(gate) * up
  SwigluOai,  // gpt-oss: x = min(gate, limit), y = clamp(up, -limit, limit), x * sigmoid(alpha x) * (y + 1)
};

struct MoeConfig {
  int n_experts = 0;       // 0: a dense FFN
  int n_experts_used = 0;  // k
  int expert_ffn_dim = 0;  // rows of each expert's gate and up
  MoeGating gating = MoeGating::Softmax;
  // Divide the k weights by their sum (clamped below at 2^-14 as llama.cpp does) (qwen3moe).
  bool normalize_weights = false;
  float weights_scale = 1.0f;  // multiplies the k weights (after normalisation); 1: none
  MoeActivation activation = MoeActivation::Swiglu;
  float swiglu_alpha = 1.702f;  // SwigluOai only
  float swiglu_limit = 7.0f;
};

// Reads expert_count, expert_used_count and expert_feed_forward_length (`prefix` is "{arch}.")
// into a copy of `arch_defaults` (gating, normalisation and activation as the architecture fixes
// them). An expert_gating_func key that names a function other than the architecture's, or no
// known function, is an error naming the key: llama.cpp ignores it for these architectures, so
// honouring a different value would compute a different model. `dense_ffn` is the
// feed_forward_length (0: absent), llama.cpp's fallback width is dense_ffn / expert_used_count.
MoeConfig read_moe_config(const gguf::File& file, const std::string& prefix, const MoeConfig& arch_defaults,
                          int dense_ffn);
void write_moe_config(const MoeConfig& moe, const std::string& prefix, gguf::Writer& writer);

}  // namespace kvslim
