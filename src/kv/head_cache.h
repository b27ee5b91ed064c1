// The tokens one (layer, KV head) keeps: keys (after RoPE), values and original positions, in
// ascending position order, stored in pages from a PagePool in the pool's row types (f32, f16,
// bf16 or q8_0). Heads of a layer may hold different tokens and different counts.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
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
  int64_t position(int64_t i) const;
  // The first index whose position is above `position` (size() when none): positions ascend.
  int64_t first_after(int64_t position) const;

  // Token i's stored rows, in key_type() / value_type() (valid once a token was appended).
  // Inline, with a 32-bit division (a head holds far fewer than 2^32 tokens): sparse attention
  // asks for two rows per token it reads, and a 64-bit division per row showed in its profile.
  const uint8_t* key_data(int64_t i) const {
    const auto [page, row] = page_and_row(i);
    return pages_[page]->keys + row * key_bytes_;
  }
  const uint8_t* value_data(int64_t i) const {
    const auto [page, row] = page_and_row(i);
    return pages_[page]->values + row * value_bytes_;
  }
  DType key_type() const { return key_type_; }
  DType value_type() const { return value_type_; }
  int head_dim() const { return head_dim_; }

  // Token i's key (value) as f32, exactly the numbers attention computes with: f32 rows are
  // returned in place (no copy); other types are decoded into `buffer` (head_dim floats), which
  // is returned. Methods score from these, so their kept sets follow what attention reads.
  const float* key_f32(int64_t i, float* buffer) const;
  const float* value_f32(int64_t i, float* buffer) const;

  // Stores the f32 rows in the pool's types (f16/bf16 round to nearest even, q8_0 as ggml).
  void append(const float* key, const float* value, int64_t position, PagePool& pool);
  // Stores rows already in the pool's types (row_bytes of head_dim elements each), copied as
  // they are: a KV file written from pages of the same types restores them bit for bit.
  void append_stored(const uint8_t* key_row, const uint8_t* value_row, int64_t position, PagePool& pool);
  // Keeps only the tokens at `keep` (strictly ascending indices into the current tokens),
  // compacted to the front in that order; pages no longer needed go back to the pool.
  void retain(std::span<const int32_t> keep, PagePool& pool);
  // Drops every token from index n on (appended rows whose KV must not stay).
  void truncate(int64_t n, PagePool& pool);
  void clear(PagePool& pool) { truncate(0, pool); }
  // Drops the first n tokens, keeping the others in order (a sliding-window layer's oldest).
  void drop_front(int64_t n, PagePool& pool);

  // For kernels: token i lives in pages()[i / page_tokens] at row i % page_tokens.
  const std::vector<KvPage*>& pages() const { return pages_; }

 private:
  std::pair<size_t, size_t> page_and_row(int64_t i) const {
    const auto u = static_cast<uint32_t>(i), pt = static_cast<uint32_t>(page_tokens_);
    return {u / pt, u % pt};
  }
  // The next token's page and row (a page is taken from the pool when the last one is full).
  std::pair<KvPage*, int64_t> next_row(PagePool& pool);

  std::vector<KvPage*> pages_;
  int64_t size_ = 0;
  int page_tokens_ = 0;  // set on first append
  int head_dim_ = 0;
  DType key_type_ = DType::F32, value_type_ = DType::F32;
  size_t key_bytes_ = 0, value_bytes_ = 0;  // bytes of one stored row
};

}  // namespace kvslim
