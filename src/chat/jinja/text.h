// Python str operations on UTF-8 strings: templates index, slice, measure and strip by code
// point (len("é") == 1), and Python's notion of whitespace and case is Unicode's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvslim::jinja::text {

// Byte offset of each code point, plus the total size at the end (size() - 1 code points).
std::vector<size_t> char_offsets(std::string_view s);
int64_t char_count(std::string_view s);
bool is_space(uint32_t cp);  // str.isspace
bool is_ascii(std::string_view s);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string capitalize(std::string_view s);  // first character upper, the rest lower
std::string title(std::string_view s);       // each word's first letter upper, the rest lower

// str.strip/lstrip/rstrip: `chars` empty-and-not-given strips whitespace.
std::string strip(std::string_view s, const std::string* chars, bool left, bool right);
// str.split / str.rsplit; sep == nullptr splits on runs of whitespace.
std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit, bool from_right);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string replace(std::string_view s, std::string_view old, std::string_view with, int64_t count);
// str.find in code points (-1 when absent); rfind when from_right.
int64_t find(std::string_view s, std::string_view needle, bool from_right);
bool is_alpha(std::string_view s);
bool is_digit(std::string_view s);
bool is_upper(std::string_view s);  // has a cased character and all cased ones are upper
bool is_lower(std::string_view s);

}  // namespace kvslim::jinja::text
