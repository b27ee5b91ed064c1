#include "press/attention_accumulator.h"

#include <algorithm>

namespace kvslim {

void AttentionAccumulator::reset(const ModelConfig& config, int64_t n_keys, int64_t from_position) {
  n_heads_ = config.n_heads;
  group_ = config.group_size();
  n_keys_ = n_keys;
  from_position_ = from_position;
  sums_.assign(size_t(config.n_layers) * n_heads_ * n_keys, 0.0f);
}

void AttentionAccumulator::on_row(int layer, int q_head, int64_t query_position, const float* probs,
                                  int64_t n_visible) {
  if (query_position < from_position_) return;
  float* sums = &sums_[(size_t(layer) * n_heads_ + q_head) * n_keys_];
  const int64_t n = std::min(n_visible, n_keys_);
  for (int64_t j = 0; j < n; ++j) sums[j] += probs[j];
}

std::vector<float> AttentionAccumulator::group_mean(int layer, int kv_head) const {
  std::vector<float> mean(n_keys_, 0.0f);
  for (int g = 0; g < group_; ++g) {
    const float* sums = q_head_sums(layer, kv_head * group_ + g);
    for (int64_t j = 0; j < n_keys_; ++j) mean[j] += sums[j];
  }
  for (float& m : mean) m /= float(group_);
  return mean;
}

}  // namespace kvslim
