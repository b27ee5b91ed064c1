#include "press/page_bounds.h"

#include <algorithm>

namespace kvslim {

void PageBounds::reset(int page_tokens, int head_dim) {
  page_tokens_ = page_tokens;
  head_dim_ = head_dim;
  n_tokens_ = 0;
  last_position_ = -1;
  min_.clear();
  max_.clear();
}

void PageBounds::sync(const HeadCache& head, const TokenView& view) {
  const int64_t n = view.size(head);
  // Positions are unique and ascending in a head, so if any folded token was evicted, the
  // token now at the last folded slot has a different position (or the view got shorter).
  const bool stale = n < n_tokens_ || (n_tokens_ > 0 && head.position(view.index(n_tokens_ - 1)) != last_position_);
  if (stale) reset(page_tokens_, head_dim_);
  row_.resize(size_t(head_dim_));
  for (int64_t s = n_tokens_; s < n; ++s) append(head.key_f32(view.index(s), row_.data()));
  if (n > 0) last_position_ = head.position(view.index(n - 1));
}

void PageBounds::append(const float* key) {
  if (n_tokens_ % page_tokens_ == 0) {
    min_.insert(min_.end(), key, key + head_dim_);
    max_.insert(max_.end(), key, key + head_dim_);
  } else {
    float* lo = &min_[min_.size() - head_dim_];
    float* hi = &max_[max_.size() - head_dim_];
    for (int c = 0; c < head_dim_; ++c) {
      lo[c] = std::min(lo[c], key[c]);
      hi[c] = std::max(hi[c], key[c]);
    }
  }
  ++n_tokens_;
}

float page_logit_bound(const float* q, const float* min, const float* max, int head_dim) {
  float bound = 0.0f;
  for (int c = 0; c < head_dim; ++c) bound += std::max(q[c] * min[c], q[c] * max[c]);
  return bound;
}

}  // namespace kvslim
