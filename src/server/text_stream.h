// Turns generated pieces into text that is safe to send: a stop string ends the text before it,
// nothing that could still become a stop string is sent early, and a UTF-8 character cut between
// two tokens is held back until it is complete.
#pragma once

#include <string>
#include <vector>

namespace kvslim::server {

class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stop = {}) : stop_(std::move(stop)) {}

  // Adds a token's piece; returns the text that can be sent now (possibly empty).
  std::string push(const std::string& piece);
  // The end of generation: everything held back (a stop-string prefix that never completed, or
  // an incomplete UTF-8 sequence, which the JSON writer replaces).
  std::string flush();
  bool stopped() const { return stopped_; }          // a stop string was found (and dropped)
  const std::string& text() const { return sent_; }  // all text returned so far

 private:
  std::string emit(size_t n);  // sends pending_[0, n)
  std::vector<std::string> stop_;
  std::string pending_;
  std::string sent_;
  bool stopped_ = false;
};

// Bytes at the end of `s` that begin a UTF-8 character not yet complete (0..3).
size_t incomplete_utf8_tail(const std::string& s);

}  // namespace kvslim::server
