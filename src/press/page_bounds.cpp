#include "press/page_bounds.h"

#include <algorithm>

#include "tensor/ops.h"

namespace kvslim {

void PageBounds::reset(int page_tokens, int head_dim) {
  if (head_dim != head_dim_) {  // the arrays are laid out per channel: a new width starts them afresh
    min_.clear();
    max_.clear();
    capacity_ = 0;
  }
  page_tokens_ = page_tokens;
  head_dim_ = head_dim;
  n_tokens_ = 0;
  last_position_ = -1;
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

// Doubles the pages every channel holds (decode appends a page every page_tokens steps).
void PageBounds::grow() {
  const int64_t capacity = std::max<int64_t>(64, 2 * capacity_);
  std::vector<float> lo(size_t(head_dim_) * capacity), hi(lo.size());
  const int64_t used = n_pages();
  for (int c = 0; c < head_dim_; ++c) {
    std::copy_n(&min_[size_t(c) * capacity_], used, &lo[size_t(c) * capacity]);
    std::copy_n(&max_[size_t(c) * capacity_], used, &hi[size_t(c) * capacity]);
  }
  min_.swap(lo);
  max_.swap(hi);
  capacity_ = capacity;
}

void PageBounds::append(const float* key) {
  const int64_t page = n_tokens_ / page_tokens_;
  if (n_tokens_ % page_tokens_ == 0) {
    if (page >= capacity_) grow();
    for (int c = 0; c < head_dim_; ++c) {
      min_[size_t(c) * capacity_ + page] = key[c];
      max_[size_t(c) * capacity_ + page] = key[c];
    }
  } else {
    for (int c = 0; c < head_dim_; ++c) {
      float& lo = min_[size_t(c) * capacity_ + page];
      float& hi = max_[size_t(c) * capacity_ + page];
      lo = std::min(lo, key[c]);
      hi = std::max(hi, key[c]);
    }
  }
  ++n_tokens_;
}

void page_logit_bounds(const PageBounds& b, const float* q, float* bounds) {
  const int64_t n = b.n_pages();
  if (n == 0) return;
  minmax_logit_bounds(b.min_channel(0), b.max_channel(0), b.channel_stride(), b.head_dim(), q, n, bounds);
}

}  // namespace kvslim
