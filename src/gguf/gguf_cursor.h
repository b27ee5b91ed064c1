// A bounds-checked little-endian reader over an in-memory GGUF image. Every read checks the
// bytes left first, and every failure names the file, the field and the byte offset.
// Internal to src/gguf.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace kvslim::gguf::detail {

// Names the field being read. Formatting waits until a read fails, so reading a 150k-entry
// token array builds no strings.
struct Field {
  explicit Field(std::string_view owner, std::string_view part = {}, std::optional<uint64_t> element = std::nullopt)
      : owner(owner), part(part), element(element) {}
  std::string describe() const;

  std::string_view owner;           // e.g. `metadata key #3 ("general.name")`
  std::string_view part;            // e.g. "array length"; may be empty
  std::optional<uint64_t> element;  // index inside an array, when reading one
};

// Replaces bytes that would garble a one-line message and caps the length, for quoting
// untrusted keys and tensor names in errors.
std::string printable(std::string_view text);

class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size, std::string_view label) : data_(data), size_(size), label_(label) {}

  uint64_t pos() const { return pos_; }
  uint64_t size() const { return size_; }
  uint64_t remaining() const { return size_ - pos_; }

  template <class T>
  T read(const Field& field) {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T), field);
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  // A u64-length-prefixed string, as a view into the image (valid as long as the image).
  std::string_view read_string(const Field& field, uint64_t max_length);

  // Fails unless `count` items of at least `min_item_bytes` each fit in the bytes left; call it
  // before looping or allocating over an untrusted count. `at` is where the count was read.
  void check_count(uint64_t count, uint64_t min_item_bytes, const Field& field, uint64_t at) const;

  [[noreturn]] void fail(uint64_t at, const Field& field, std::string_view problem) const;

 private:
  void need(uint64_t n, const Field& field) const;

  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  std::string_view label_;
};

}  // namespace kvslim::gguf::detail
