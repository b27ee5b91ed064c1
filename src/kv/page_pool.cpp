#include "kv/page_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "util/error.h"

namespace kvslim {

namespace {

uint64_t align_to(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

// One mapping per page: keys, values, positions, then the KvPage header itself, rounded up to
// whole OS pages. Keys start on an OS page boundary and values on a 64-byte boundary, so rows
// are 64-byte aligned when their size is a multiple of 64 (f32 with head_dim 16k, f16/bf16 with
// 32k). The f32 layout is the one kvslim always had: values right after the keys.
PagePool::PagePool(int head_dim, int page_tokens, DType key_type, DType value_type)
    : head_dim_(head_dim), page_tokens_(page_tokens), key_type_(key_type), value_type_(value_type) {
  if (head_dim < 1) fail("KV page pool: head_dim must be >= 1 (got {})", head_dim);
  if (page_tokens < 1) fail("KV page pool: page_tokens must be >= 1 (got {})", page_tokens);
  for (DType t : {key_type, value_type}) {
    if (t != DType::F32 && t != DType::F16 && t != DType::BF16 && t != DType::Q8_0)
      fail("KV page pool: {} is not a KV type (f32, f16, bf16, q8_0)", dtype_name(t));
    if (t == DType::Q8_0 && head_dim % kQ8Block != 0)
      fail("KV page pool: q8_0 rows need head_dim to be a multiple of {} (got {})", kQ8Block, head_dim);
  }
  key_row_bytes_ = row_bytes(key_type, head_dim);
  value_row_bytes_ = row_bytes(value_type, head_dim);
  keys_bytes_ = uint64_t(page_tokens) * key_row_bytes_;
  values_offset_ = align_to(keys_bytes_, 64);
  positions_offset_ = align_to(values_offset_ + uint64_t(page_tokens) * value_row_bytes_, alignof(int64_t));
  header_offset_ = align_to(positions_offset_ + uint64_t(page_tokens) * sizeof(int64_t), alignof(KvPage));
  const uint64_t os_page = uint64_t(sysconf(_SC_PAGESIZE));
  page_bytes_ = align_to(header_offset_ + sizeof(KvPage), os_page);
}

PagePool::~PagePool() {
  // Pages still handed out belong to HeadCaches, whose owner clears them into the pool before
  // the pool dies (PagedKvCache's destructor does), so by now every mapped page is free.
  for (KvPage* page : free_) unmap_page(page);
}

KvPage* PagePool::map_page(bool populate) {
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | (populate ? MAP_POPULATE : 0);
  void* base = mmap(nullptr, page_bytes_, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (base == MAP_FAILED)
    fail("KV cache: cannot map a page of {} bytes ({} pages mapped): {}", page_bytes_, in_use_ + int64_t(free_.size()),
         std::strerror(errno));
  uint8_t* b = static_cast<uint8_t*>(base);
  return new (b + header_offset_) KvPage{b, b + values_offset_, reinterpret_cast<int64_t*>(b + positions_offset_)};
}

void PagePool::unmap_page(KvPage* page) { munmap(page->keys, page_bytes_); }

KvPage* PagePool::acquire() {
  KvPage* page;
  if (!free_.empty()) {
    page = free_.back();
    free_.pop_back();
  } else {
    // About to be written: faulted in by the one mmap call rather than one trap per 4 KiB as
    // rows arrive (a 512-token F16 prefill appended its KV in 65-77 ms instead of 36, 2026-11-29).
    page = map_page(true);
  }
  ++in_use_;
  if (uint64_t(in_use_) > peak_in_use_) peak_in_use_ = uint64_t(in_use_);
  return page;
}

void PagePool::release(KvPage* page) {
  --in_use_;
  if (in_use_ + int64_t(free_.size()) + 1 <= reserve_)
    free_.push_back(page);
  else
    unmap_page(page);
}

void PagePool::reserve(int64_t n_pages) {
  reserve_ = n_pages < 0 ? 0 : n_pages;
  // The free list never holds more than the reserve, so release() never allocates.
  free_.reserve(size_t(reserve_));
  while (in_use_ + int64_t(free_.size()) < reserve_) free_.push_back(map_page(false));
  // A lowered reserve gives surplus free pages back to the OS.
  while (!free_.empty() && in_use_ + int64_t(free_.size()) > reserve_) {
    unmap_page(free_.back());
    free_.pop_back();
  }
}

}  // namespace kvslim
