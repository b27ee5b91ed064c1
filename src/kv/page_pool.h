// Fixed-size pages of KV storage for one head size and one pair of row types (keys and values
// may be stored as f32, f16, bf16 or q8_0). Pages are mapped from the OS one by one and a
// released page goes to a free list (reused first) or, beyond the reserve, back to the OS, so
// the process's KV memory really falls when tokens are evicted.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/dtype.h"

namespace kvslim {

struct KvPage {
  uint8_t* keys;       // [page_tokens] rows of key_row_bytes, in the pool's key type
  uint8_t* values;     // [page_tokens] rows of value_row_bytes, in the pool's value type
  int64_t* positions;  // [page_tokens] original positions
};

class PagePool {
 public:
  PagePool(int head_dim, int page_tokens, DType key_type = DType::F32, DType value_type = DType::F32);
  ~PagePool();
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  int head_dim() const { return head_dim_; }
  int page_tokens() const { return page_tokens_; }
  uint64_t page_bytes() const { return page_bytes_; }
  DType key_type() const { return key_type_; }
  DType value_type() const { return value_type_; }
  size_t key_row_bytes() const { return key_row_bytes_; }
  size_t value_row_bytes() const { return value_row_bytes_; }

  KvPage* acquire();           // a free page, or a newly mapped one (throws kvslim::Error if mapping fails)
  void release(KvPage* page);  // back to the free list, or unmapped beyond the reserve
  // Keeps at least `n_pages` pages mapped (in use or free) so that later acquires (decode) map nothing.
  void reserve(int64_t n_pages);

  uint64_t bytes_in_use() const { return uint64_t(in_use_) * page_bytes_; }  // pages handed out
  uint64_t bytes_mapped() const { return uint64_t(in_use_ + free_.size()) * page_bytes_; }
  uint64_t peak_bytes_in_use() const { return peak_in_use_ * page_bytes_; }

 private:
  // A new page; populate faults all of it in now (pages acquired to be written at once), not
  // reserved ones, which cost no resident memory until decode reaches them.
  KvPage* map_page(bool populate);
  void unmap_page(KvPage* page);

  int head_dim_, page_tokens_;
  DType key_type_, value_type_;
  size_t key_row_bytes_, value_row_bytes_;
  uint64_t keys_bytes_, values_offset_, positions_offset_, header_offset_;
  uint64_t page_bytes_;
  int64_t in_use_ = 0, reserve_ = 0;
  uint64_t peak_in_use_ = 0;
  std::vector<KvPage*> free_;
};

}  // namespace kvslim
