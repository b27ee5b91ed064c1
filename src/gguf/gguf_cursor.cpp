#include "gguf/gguf_cursor.h"

#include "util/error.h"

namespace kvslim::gguf::detail {

std::string Field::describe() const {
  std::string text(owner);
  if (element) text += fmt::format(" element #{}", *element);
  if (!part.empty()) {
    text += ' ';
    text += part;
  }
  return text;
}

std::string printable(std::string_view text) {
  constexpr size_t kMaxShown = 80;
  std::string shown;
  for (char c : text.substr(0, kMaxShown)) shown += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (text.size() > kMaxShown) shown += "...";
  return shown;
}

std::string_view Cursor::read_string(const Field& field, uint64_t max_length) {
  const uint64_t at = pos_;
  const auto length = read<uint64_t>(field);
  if (length > max_length) {
    fail(at, field, fmt::format("string length {} exceeds the limit of {} bytes", length, max_length));
  }
  if (length > remaining()) {
    fail(at, field, fmt::format("string length {} exceeds the {} bytes left in the file", length, remaining()));
  }
  std::string_view text(reinterpret_cast<const char*>(data_ + pos_), length);
  pos_ += length;
  return text;
}

void Cursor::check_count(uint64_t count, uint64_t min_item_bytes, const Field& field, uint64_t at) const {
  if (count > remaining() / min_item_bytes) {
    fail(at, field,
         fmt::format("{} items cannot fit in the {} bytes left in the file (each takes at least {} bytes)", count,
                     remaining(), min_item_bytes));
  }
}

void Cursor::fail(uint64_t at, const Field& field, std::string_view problem) const {
  kvslim::fail("{}: {}: {} at byte {}", label_, field.describe(), problem, at);
}

void Cursor::need(uint64_t n, const Field& field) const {
  if (n > remaining()) {
    fail(pos_, field, fmt::format("needs {} bytes but only {} remain (file truncated?)", n, remaining()));
  }
}

}  // namespace kvslim::gguf::detail
