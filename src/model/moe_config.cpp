#include "model/moe_config.h"

#include "util/error.h"

namespace kvslim {

const char* moe_gating_name(MoeGating gating) {
  switch (gating) {
    case MoeGating::Softmax: return "softmax";
    case MoeGating::SoftmaxWeight: return "softmax_weight";
  }
  return "?";
}

MoeConfig read_moe_config(const gguf::File& file, const std::string& prefix, const MoeConfig& arch_defaults,
                          int dense_ffn) {
  MoeConfig m = arch_defaults;
  auto count = [&](const std::string& key, uint64_t limit) {
    const std::optional<uint64_t> v = file.get_uint_opt(key);
    if (!v) fail("{}: missing metadata '{}' (a mixture-of-experts architecture needs it)", file.path(), key);
    if (*v == 0 || *v > limit) fail("{}: metadata '{}' = {} is out of range [1, {}]", file.path(), key, *v, limit);
    return int(*v);
  };
  m.n_experts = count(prefix + "expert_count", 4096);
  m.n_experts_used = count(prefix + "expert_used_count", 4096);
  if (m.n_experts_used > m.n_experts)
    fail("{}: metadata '{}expert_used_count' = {} exceeds '{}expert_count' = {}", file.path(), prefix, m.n_experts_used,
         prefix, m.n_experts);
  if (file.get_uint_opt(prefix + "expert_feed_forward_length")) {
    m.expert_ffn_dim = count(prefix + "expert_feed_forward_length", 1u << 24);
  } else if (dense_ffn > 0 && dense_ffn % m.n_experts_used == 0) {
    m.expert_ffn_dim = dense_ffn / m.n_experts_used;
  } else {
    fail("{}: missing metadata '{}expert_feed_forward_length'", file.path(), prefix);
  }
  if (const std::optional<uint64_t> g = file.get_uint_opt(prefix + "expert_gating_func")) {
    const bool known = *g == uint64_t(MoeGating::Softmax) || *g == uint64_t(MoeGating::SoftmaxWeight);
    if (!known)
      fail(
          "{}: metadata '{}expert_gating_func' = {} is not a supported gating function (1: softmax, 3: "
          "softmax_weight)",
          file.path(), prefix, *g);
    if (MoeGating(*g) != arch_defaults.gating)
      fail("{}: metadata '{}expert_gating_func' = {} ({}) contradicts the architecture's {} router", file.path(),
           prefix, *g, moe_gating_name(MoeGating(*g)), moe_gating_name(arch_defaults.gating));
  }
  return m;
}

void write_moe_config(const MoeConfig& moe, const std::string& prefix, gguf::Writer& w) {
  using gguf::Value;
  w.set(prefix + "expert_count", Value::of_u32(moe.n_experts));
  w.set(prefix + "expert_used_count", Value::of_u32(moe.n_experts_used));
  w.set(prefix + "expert_feed_forward_length", Value::of_u32(moe.expert_ffn_dim));
}

}  // namespace kvslim
