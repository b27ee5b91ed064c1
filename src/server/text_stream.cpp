#include "server/text_stream.h"

#include <algorithm>

namespace kvslim::server {

size_t incomplete_utf8_tail(const std::string& s) {
  // Walk back over at most 3 continuation bytes to the lead byte of the last character.
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(4, n); ++back) {
    const unsigned char c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    size_t need = 1;
    if ((c & 0xE0) == 0xC0)
      need = 2;
    else if ((c & 0xF0) == 0xE0)
      need = 3;
    else if ((c & 0xF8) == 0xF0)
      need = 4;
    return need > back ? back : 0;
  }
  return 0;  // only stray continuation bytes: nothing will complete them
}

std::string TextStream::emit(size_t n) {
  std::string out = pending_.substr(0, n);
  pending_.erase(0, n);
  sent_ += out;
  return out;
}

std::string TextStream::push(const std::string& piece) {
  if (stopped_) return {};
  pending_ += piece;
  size_t first_stop = std::string::npos;
  for (const std::string& s : stop_) first_stop = std::min(first_stop, pending_.find(s));
  if (first_stop != std::string::npos) {
    stopped_ = true;
    std::string out = emit(first_stop);
    pending_.clear();
    return out;
  }
  // Hold back the longest end of the pending text that starts some stop string.
  size_t hold = 0;
  for (const std::string& s : stop_)
    for (size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len)
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
  size_t ready = pending_.size() - hold;
  ready -= incomplete_utf8_tail(pending_.substr(0, ready));
  return emit(ready);
}

std::string TextStream::flush() {
  if (stopped_) return {};
  return emit(pending_.size());
}

}  // namespace kvslim::server
