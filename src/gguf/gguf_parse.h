// The validating GGUF header parser behind File. Internal to src/gguf.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"

namespace kvslim::gguf::detail {

// Arrays of arrays deeper than this are rejected, bounding the parser's recursion.
constexpr int kMaxArrayDepth = 8;
// Spec limits: keys are at most 65535 bytes, tensor names at most 64.
constexpr uint64_t kMaxKeyLength = 65535;
constexpr uint64_t kMaxTensorNameLength = 64;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
constexpr uint64_t kDefaultAlignment = 32;

struct Header {
  uint32_t version = 0;
  uint64_t alignment = kDefaultAlignment;
  uint64_t data_offset = 0;  // start of the data section, from the start of the file
  std::vector<MetadataEntry> metadata;
  std::vector<TensorInfo> tensors;
};

// Parses and validates everything before the tensor data, and checks that every tensor's data
// lies inside the image. `label` names the file in error messages. Throws kvslim::Error.
Header parse_header(const uint8_t* data, uint64_t size, std::string_view label);

// True for a usable general.alignment value: a non-zero power of two.
inline bool valid_alignment(uint64_t alignment) { return alignment != 0 && (alignment & (alignment - 1)) == 0; }

}  // namespace kvslim::gguf::detail
