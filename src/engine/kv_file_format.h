// The layout constants of compressed-KV files, shared by the writer (kv_file.cpp) and the reader
// (kv_file_read.cpp): the format tag and version, tensor type ids, tensor names and the checksum.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace kvslim::kv_file {

inline constexpr const char* kFormat = "kvslim-kv";
inline constexpr uint32_t kVersion = 1;
inline constexpr uint32_t kTypeI32 = 26, kTypeI64 = 27;  // ggml tensor type ids

// FNV-1a 64 over every tensor's bytes in file order: a flipped bit in the K/V data (which no
// structural check can see) is refused too.
struct Checksum {
  uint64_t h = 1469598103934665603ull;
  void add(const uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
};

inline std::string head_name(int layer, int kv_head, const char* part) {
  return fmt::format("kv.{}.{}.{}", layer, kv_head, part);
}

}  // namespace kvslim::kv_file
