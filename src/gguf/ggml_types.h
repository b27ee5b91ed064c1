// The ggml tensor types a GGUF file may name: block layout and name per type id.
// Internal to src/gguf; the public entry points are tensor_type_name() and tensor_bytes().
#pragma once

#include <cstdint>

namespace kvslim::gguf::detail {

struct TypeTraits {
  const char* name;     // lower-case ggml name, e.g. "q4_k"
  uint32_t block_size;  // elements per block (1 for plain scalars)
  uint32_t type_size;   // bytes per block
};

// nullptr for ids ggml never assigned or has retired from GGUF files (4, 5, 31-33, 36-38).
const TypeTraits* find_type_traits(uint32_t type_id);

}  // namespace kvslim::gguf::detail
