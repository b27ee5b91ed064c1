#include "kv/head_cache.h"

#include <algorithm>
#include <cstring>

#include "util/error.h"

namespace kvslim {

const float* HeadCache::key_f32(int64_t i, float* buffer) const {
  if (key_type_ == DType::F32) return reinterpret_cast<const float*>(key_data(i));
  convert_to_f32(key_type_, key_data(i), buffer, head_dim_);
  return buffer;
}

const float* HeadCache::value_f32(int64_t i, float* buffer) const {
  if (value_type_ == DType::F32) return reinterpret_cast<const float*>(value_data(i));
  convert_to_f32(value_type_, value_data(i), buffer, head_dim_);
  return buffer;
}

int64_t HeadCache::position(int64_t i) const { return pages_[size_t(i / page_tokens_)]->positions[i % page_tokens_]; }

int64_t HeadCache::first_after(int64_t position) const {
  int64_t lo = 0, hi = size_;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (this->position(mid) > position)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

std::pair<KvPage*, int64_t> HeadCache::next_row(PagePool& pool) {
  if (page_tokens_ == 0) {
    page_tokens_ = pool.page_tokens();
    head_dim_ = pool.head_dim();
    key_type_ = pool.key_type();
    value_type_ = pool.value_type();
    key_bytes_ = pool.key_row_bytes();
    value_bytes_ = pool.value_row_bytes();
  }
  const int64_t row = size_ % page_tokens_;
  if (size_ == int64_t(pages_.size()) * page_tokens_) pages_.push_back(pool.acquire());
  return {pages_.back(), row};
}

void HeadCache::append(const float* key, const float* value, int64_t position, PagePool& pool) {
  const auto [page, row] = next_row(pool);
  convert_from_f32(key, key_type_, page->keys + size_t(row) * key_bytes_, head_dim_);
  convert_from_f32(value, value_type_, page->values + size_t(row) * value_bytes_, head_dim_);
  page->positions[row] = position;
  ++size_;
}

void HeadCache::append_stored(const uint8_t* key_row, const uint8_t* value_row, int64_t position, PagePool& pool) {
  const auto [page, row] = next_row(pool);
  std::memcpy(page->keys + size_t(row) * key_bytes_, key_row, key_bytes_);
  std::memcpy(page->values + size_t(row) * value_bytes_, value_row, value_bytes_);
  page->positions[row] = position;
  ++size_;
}

void HeadCache::retain(std::span<const int32_t> keep, PagePool& pool) {
  // Validate everything first so that a bad selection leaves the cache untouched.
  for (size_t j = 0; j < keep.size(); ++j) {
    if (keep[j] < 0 || keep[j] >= size_)
      fail("KV retain: index {} (#{}) is outside the {} cached tokens", keep[j], j, size_);
    if (j > 0 && keep[j] <= keep[j - 1])
      fail("KV retain: indices must be strictly ascending (#{} is {} after {})", j, keep[j], keep[j - 1]);
  }
  // keep[j] >= j, so moving rows forward in ascending order never overwrites a row still to be
  // read. Runs of consecutive indices move as one block per page segment.
  const int64_t pt = page_tokens_;
  int64_t dst = 0;
  for (size_t j = 0; j < keep.size();) {
    int64_t src = keep[j];
    if (src == dst) {
      ++j, ++dst;
      continue;
    }
    // The longest run src, src+1, ... that stays inside one source page and one destination page.
    int64_t run = 1;
    const int64_t limit = std::min(pt - src % pt, pt - dst % pt);
    while (run < limit && j + size_t(run) < keep.size() && keep[j + size_t(run)] == src + run) ++run;
    const KvPage* from = pages_[size_t(src / pt)];
    KvPage* to = pages_[size_t(dst / pt)];
    const int64_t fr = src % pt, tr = dst % pt;
    std::memmove(to->keys + size_t(tr) * key_bytes_, from->keys + size_t(fr) * key_bytes_, size_t(run) * key_bytes_);
    std::memmove(to->values + size_t(tr) * value_bytes_, from->values + size_t(fr) * value_bytes_,
                 size_t(run) * value_bytes_);
    std::memmove(to->positions + tr, from->positions + fr, size_t(run) * sizeof(int64_t));
    j += size_t(run);
    dst += run;
  }
  truncate(int64_t(keep.size()), pool);
}

void HeadCache::drop_front(int64_t n, PagePool& pool) {
  if (n < 0 || n > size_) fail("KV drop_front: cannot drop {} of {} cached tokens", n, size_);
  if (n == 0) return;
  // Whole leading pages go back to the pool as they are; the rest moves forward by what is left
  // of n (retain moves runs page segment by page segment).
  const int64_t whole_pages = n / page_tokens_;
  for (int64_t p = 0; p < whole_pages; ++p) pool.release(pages_[size_t(p)]);
  pages_.erase(pages_.begin(), pages_.begin() + whole_pages);
  size_ -= whole_pages * page_tokens_;
  const int64_t rest = n - whole_pages * page_tokens_;
  if (rest == 0) return;
  std::vector<int32_t> keep(size_t(size_ - rest));
  for (size_t j = 0; j < keep.size(); ++j) keep[j] = int32_t(rest + int64_t(j));
  retain(keep, pool);
}

void HeadCache::truncate(int64_t n, PagePool& pool) {
  if (n < 0 || n > size_) fail("KV truncate: cannot keep {} of {} cached tokens", n, size_);
  size_ = n;
  const size_t pages_needed = page_tokens_ == 0 ? 0 : size_t((n + page_tokens_ - 1) / page_tokens_);
  while (pages_.size() > pages_needed) {
    pool.release(pages_.back());
    pages_.pop_back();
  }
}

}  // namespace kvslim
