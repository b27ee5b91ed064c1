// What the chat-template tests share: the fixed clock the conformance renderings were made with
// (../shared/chat-templates/README.md: 2026-01-15 09:30:00, for strftime_now) and reading a
// rendering back.
#pragma once

#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace kvslim::testing {

inline std::tm corpus_clock() {
  std::tm t{};
  t.tm_year = 2026 - 1900;
  t.tm_mon = 0;
  t.tm_mday = 15;
  t.tm_hour = 9;
  t.tm_min = 30;
  t.tm_wday = 4;  // a Thursday
  t.tm_yday = 14;
  return t;
}

inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace kvslim::testing
