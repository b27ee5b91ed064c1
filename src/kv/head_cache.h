// The tokens one (layer, KV head) keeps: keys (after RoPE), values and original positions, in
// ascending position order, stored in pages from a PagePool. Heads of a layer may hold
// different tokens and different counts.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/page_pool.h"

namespace kvslim {

class HeadCache {
 public:
  HeadCache() = default;
  HeadCache(const HeadCache&) = delete;
  HeadCache& operator=(const HeadCache&) = delete;
  HeadCache(HeadCache&&) noexcept = default;
  HeadCache& operator=(HeadCache&&) noexcept = default;

  int64_t size() const { return size_; }
  const float* key(int64_t i) const;
  const float* value(int64_t i) const;
  int64_t position(int64_t i) const;

  void append(const float* key, const float* value, int64_t position, PagePool& pool);
  // Keeps only the tokens at `keep` (strictly ascending indices into the current tokens),
  // compacted to the front in that order; pages no longer needed go back to the pool.
  void retain(std::span<const int32_t> keep, PagePool& pool);
  // Drops every token from index n on (appended rows whose KV must not stay).
  void truncate(int64_t n, PagePool& pool);
  void clear(PagePool& pool) { truncate(0, pool); }

  // For kernels: token i lives in pages()[i / page_tokens] at row i % page_tokens.
  const std::vector<KvPage*>& pages() const { return pages_; }

 private:
  std::vector<KvPage*> pages_;
  int64_t size_ = 0;
  int page_tokens_ = 0;  // set on first append
  int head_dim_ = 0;
};

}  // namespace kvslim
