// Fixed-size pages of KV storage for one head size. Pages are mapped from the OS one by one and
// a released page goes to a free list (reused first) or, beyond the reserve, back to the OS, so
// the process's KV memory really falls when tokens are evicted.
#pragma once

#include <cstdint>
#include <vector>

namespace kvslim {

struct KvPage {
  float* keys;         // [page_tokens][head_dim]
  float* values;       // [page_tokens][head_dim]
  int64_t* positions;  // [page_tokens] original positions
};

class PagePool {
 public:
  PagePool(int head_dim, int page_tokens);
  ~PagePool();
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  int head_dim() const { return head_dim_; }
  int page_tokens() const { return page_tokens_; }
  uint64_t page_bytes() const { return page_bytes_; }

  KvPage* acquire();            // a free page, or a newly mapped one (throws kvslim::Error if mapping fails)
  void release(KvPage* page);   // back to the free list, or unmapped beyond the reserve
  // Keeps at least `n_pages` pages mapped (in use or free) so that later acquires (decode) map nothing.
  void reserve(int64_t n_pages);

  uint64_t bytes_in_use() const { return uint64_t(in_use_) * page_bytes_; }   // pages handed out
  uint64_t bytes_mapped() const { return uint64_t(in_use_ + free_.size()) * page_bytes_; }
  uint64_t peak_bytes_in_use() const { return peak_in_use_ * page_bytes_; }

 private:
  KvPage* map_page();
  void unmap_page(KvPage* page);

  int head_dim_, page_tokens_;
  uint64_t page_bytes_;
  int64_t in_use_ = 0, reserve_ = 0;
  uint64_t peak_in_use_ = 0;
  std::vector<KvPage*> free_;
};

}  // namespace kvslim
