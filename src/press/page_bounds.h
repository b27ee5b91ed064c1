// Per-page key summaries for decode-time sparse attention (Quest §3.2, RocketKV §3.4 step 1):
// the cached tokens of one (layer, KV head) are cut into pages of `page_tokens` consecutive
// cache indices, and each page stores the per-channel minimum and maximum of its keys. The
// summaries follow the cache: appended tokens are folded in incrementally, and any eviction
// or truncation since the last sync rebuilds them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/head_cache.h"

namespace kvslim {

// Which cached tokens a PageBounds (and a selection over it) covers, in order: the cache
// indices `prefix`, then every index from `tail_from` on. The default covers the whole cache.
// RocketKV-MT's working set is a stage-1 selection of the prompt plus every later token.
struct TokenView {
  std::span<const int32_t> prefix;
  int64_t tail_from = 0;

  int64_t size(const HeadCache& head) const { return int64_t(prefix.size()) + head.size() - tail_from; }
  int64_t index(int64_t slot) const {
    const int64_t p = int64_t(prefix.size());
    return slot < p ? prefix[slot] : tail_from + (slot - p);
  }
  bool whole_cache() const { return prefix.empty() && tail_from == 0; }
};

// Stored channel-major: channel c's minima (and maxima) of every page are one contiguous array,
// so that a score over pages streams only the channels it uses, vectorised over pages (RocketKV
// reads r of head_dim channels, and of each only the min or the max, as its traffic counts).
class PageBounds {
 public:
  // Forgets every token.
  void reset(int page_tokens, int head_dim);

  // Brings the summaries in step with the tokens `view` covers in `head`: new tokens are folded
  // in; if tokens were evicted or truncated since the last sync, everything is recomputed.
  void sync(const HeadCache& head, const TokenView& view = {});

  // Adds one key as the next token.
  void append(const float* key);

  int page_tokens() const { return page_tokens_; }
  int head_dim() const { return head_dim_; }
  int64_t n_tokens() const { return n_tokens_; }
  int64_t n_pages() const { return (n_tokens_ + page_tokens_ - 1) / page_tokens_; }
  // Channel c of every page: n_pages() values.
  const float* min_channel(int c) const { return &min_[size_t(c) * capacity_]; }
  const float* max_channel(int c) const { return &max_[size_t(c) * capacity_]; }
  // Floats from one channel's array to the next's.
  int64_t channel_stride() const { return capacity_; }

 private:
  void grow();

  int page_tokens_ = 1, head_dim_ = 0;
  int64_t n_tokens_ = 0;
  int64_t capacity_ = 0;          // pages each channel's array holds
  int64_t last_position_ = -1;    // original position of the last folded token
  std::vector<float> min_, max_;  // [head_dim][capacity_]
  std::vector<float> row_;        // a key decoded from an f16/bf16/q8_0 page
};

// Quest's upper bound on q·k over the keys of each page (Quest §3.2, Algorithm 1):
// bounds[p] = Σ_c max(q_c * min_c, q_c * max_c), summed over c in order, for every page.
void page_logit_bounds(const PageBounds& b, const float* q, float* bounds);

}  // namespace kvslim
