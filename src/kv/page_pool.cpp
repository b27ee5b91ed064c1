#include "kv/page_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "util/error.h"

namespace kvslim {

namespace {

// One mapping per page: keys, values, positions, then the KvPage header itself, rounded up to
// whole OS pages. Keys start on an OS page boundary, so rows are 64-byte aligned when
// head_dim * 4 is a multiple of 64.
uint64_t keys_bytes(int head_dim, int page_tokens) { return uint64_t(page_tokens) * head_dim * sizeof(float); }

uint64_t header_offset(int head_dim, int page_tokens) {
  const uint64_t end = 2 * keys_bytes(head_dim, page_tokens) + uint64_t(page_tokens) * sizeof(int64_t);
  return (end + alignof(KvPage) - 1) / alignof(KvPage) * alignof(KvPage);
}

}  // namespace

PagePool::PagePool(int head_dim, int page_tokens) : head_dim_(head_dim), page_tokens_(page_tokens) {
  if (head_dim < 1) fail("KV page pool: head_dim must be >= 1 (got {})", head_dim);
  if (page_tokens < 1) fail("KV page pool: page_tokens must be >= 1 (got {})", page_tokens);
  const uint64_t os_page = uint64_t(sysconf(_SC_PAGESIZE));
  const uint64_t bytes = header_offset(head_dim, page_tokens) + sizeof(KvPage);
  page_bytes_ = (bytes + os_page - 1) / os_page * os_page;
}

PagePool::~PagePool() {
  // Pages still handed out belong to HeadCaches, whose owner clears them into the pool before
  // the pool dies (PagedKvCache's destructor does), so by now every mapped page is free.
  for (KvPage* page : free_) unmap_page(page);
}

KvPage* PagePool::map_page() {
  void* base = mmap(nullptr, page_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED)
    fail("KV cache: cannot map a page of {} bytes ({} pages mapped): {}", page_bytes_, in_use_ + int64_t(free_.size()),
         std::strerror(errno));
  char* b = static_cast<char*>(base);
  const uint64_t kb = keys_bytes(head_dim_, page_tokens_);
  return new (b + header_offset(head_dim_, page_tokens_))
      KvPage{reinterpret_cast<float*>(b), reinterpret_cast<float*>(b + kb), reinterpret_cast<int64_t*>(b + 2 * kb)};
}

void PagePool::unmap_page(KvPage* page) { munmap(page->keys, page_bytes_); }

KvPage* PagePool::acquire() {
  KvPage* page;
  if (!free_.empty()) {
    page = free_.back();
    free_.pop_back();
  } else {
    page = map_page();
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
  while (in_use_ + int64_t(free_.size()) < reserve_) free_.push_back(map_page());
  // A lowered reserve gives surplus free pages back to the OS.
  while (!free_.empty() && in_use_ + int64_t(free_.size()) > reserve_) {
    unmap_page(free_.back());
    free_.pop_back();
  }
}

}  // namespace kvslim
