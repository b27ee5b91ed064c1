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
  int64_t n_tokens() const { return n_tokens_; }
  int64_t n_pages() const { return (n_tokens_ + page_tokens_ - 1) / page_tokens_; }
  const float* min(int64_t page) const { return &min_[size_t(page) * head_dim_]; }
  const float* max(int64_t page) const { return &max_[size_t(page) * head_dim_]; }

 private:
  int page_tokens_ = 1, head_dim_ = 0;
  int64_t n_tokens_ = 0;
  int64_t last_position_ = -1;  // original position of the last folded token
  std::vector<float> min_, max_;  // [page][head_dim]
  std::vector<float> row_;        // a key decoded from an f16/bf16/q8_0 page
};

// Quest's upper bound on q·k over the keys of a page (Quest §3.2, Algorithm 1):
// Σ_i max(q_i * min_i, q_i * max_i).
float page_logit_bound(const float* q, const float* min, const float* max, int head_dim);

}  // namespace kvslim
