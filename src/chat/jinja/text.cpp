#include "chat/jinja/text.h"

#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>

#include "chat/jinja/value.h"
#include "util/utf8.h"

namespace kvslim::jinja::text {

namespace {

std::vector<uint32_t> decode(std::string_view s) {
  std::vector<uint32_t> cps;
  cps.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) cps.push_back(decode_utf8(s, pos));
  return cps;
}

bool is_cased_upper(uint32_t cp) { return u_isUUppercase(static_cast<UChar32>(cp)); }
bool is_cased_lower(uint32_t cp) { return u_isULowercase(static_cast<UChar32>(cp)); }
bool is_letter(uint32_t cp) { return u_isalpha(static_cast<UChar32>(cp)); }

// ICU's full case mapping (ß -> SS), as Python's str.upper/lower do, locale-independent.
std::string map_case(std::string_view s, bool to_upper) {
  if (is_ascii(s)) {
    std::string out(s);
    for (char& c : out)
      c = static_cast<char>(to_upper ? std::toupper(static_cast<unsigned char>(c))
                                     : std::tolower(static_cast<unsigned char>(c)));
    return out;
  }
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())));
  if (to_upper)
    u.toUpper(icu::Locale::getRoot());
  else
    u.toLower(icu::Locale::getRoot());
  std::string out;
  u.toUTF8String(out);
  return out;
}

bool in_chars(uint32_t cp, const std::vector<uint32_t>& chars) {
  return std::find(chars.begin(), chars.end(), cp) != chars.end();
}

}  // namespace

std::vector<size_t> char_offsets(std::string_view s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  for (size_t pos = 0; pos < s.size(); pos += utf8_char_length(s, pos)) offsets.push_back(pos);
  offsets.push_back(s.size());
  return offsets;
}

int64_t char_count(std::string_view s) {
  if (is_ascii(s)) return static_cast<int64_t>(s.size());
  int64_t n = 0;
  for (size_t pos = 0; pos < s.size(); pos += utf8_char_length(s, pos)) ++n;
  return n;
}

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

bool is_space(uint32_t cp) {
  // Python's str.isspace: bidirectional class WS/B/S or category Zs.
  if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F)) return true;
  if (cp < 0x80) return false;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::string upper(std::string_view s) { return map_case(s, true); }
std::string lower(std::string_view s) { return map_case(s, false); }

std::string capitalize(std::string_view s) {
  if (s.empty()) return {};
  const size_t first = utf8_char_length(s, 0);
  return upper(s.substr(0, first)) + lower(s.substr(first));
}

std::string title(std::string_view s) {
  // Python: a cased character after an uncased one starts a word.
  std::string out;
  bool previous_cased = false;
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    const uint32_t cp = decode_utf8(s, pos);
    const std::string_view ch = s.substr(start, pos - start);
    const bool cased = is_cased_upper(cp) || is_cased_lower(cp) || u_istitle(static_cast<UChar32>(cp));
    out += previous_cased ? lower(ch) : upper(ch);
    previous_cased = cased;
  }
  return out;
}

std::string title_filter(std::string_view s) {
  std::string out;
  bool at_start = true;
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    const uint32_t cp = decode_utf8(s, pos);
    const std::string_view ch = s.substr(start, pos - start);
    const bool separator = is_space(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
    if (separator) {
      out += ch;
      at_start = true;
      continue;
    }
    out += at_start ? upper(ch) : lower(ch);
    at_start = false;
  }
  return out;
}

std::string strip(std::string_view s, const std::string* chars, bool left, bool right) {
  // Scans only the ends (documents can be megabytes long).
  const std::vector<uint32_t> set = chars ? decode(*chars) : std::vector<uint32_t>{};
  auto strippable = [&](uint32_t cp) { return chars ? in_chars(cp, set) : is_space(cp); };
  size_t begin = 0, end = s.size();
  if (left) {
    while (begin < end) {
      size_t next = begin;
      if (!strippable(decode_utf8(s, next))) break;
      begin = next;
    }
  }
  if (right) {
    while (end > begin) {
      size_t start = end - 1;
      // Back to the start of the last character (at most 3 continuation bytes).
      while (start > begin && end - start < 4 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
      size_t after = start;
      const uint32_t cp = decode_utf8(s, after);
      if (after != end) break;  // an invalid byte: never whitespace, kept
      if (!strippable(cp)) break;
      end = start;
    }
  }
  return std::string(s.substr(begin, end - begin));
}

std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (sep) {
    if (sep->empty()) raise("empty separator");
    if (!from_right) {
      size_t pos = 0;
      while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
        const size_t hit = s.find(*sep, pos);
        if (hit == std::string_view::npos) break;
        parts.emplace_back(s.substr(pos, hit - pos));
        pos = hit + sep->size();
      }
      parts.emplace_back(s.substr(pos));
      return parts;
    }
    size_t end = s.size();
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      if (end < sep->size()) break;
      const size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      parts.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    parts.emplace_back(s.substr(0, end));
    std::reverse(parts.begin(), parts.end());
    return parts;
  }
  // Runs of whitespace separate; empty strings never appear.
  const std::vector<size_t> offsets = char_offsets(s);
  const size_t n = offsets.size() - 1;
  auto space_at = [&](size_t i) {
    size_t pos = offsets[i];
    return is_space(decode_utf8(s, pos));
  };
  if (!from_right) {
    size_t i = 0;
    while (true) {
      while (i < n && space_at(i)) ++i;
      if (i == n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t end = n;
        while (end > i && space_at(end - 1)) --end;
        parts.emplace_back(s.substr(offsets[i], offsets[end] - offsets[i]));
        break;
      }
      size_t j = i;
      while (j < n && !space_at(j)) ++j;
      parts.emplace_back(s.substr(offsets[i], offsets[j] - offsets[i]));
      i = j;
    }
    return parts;
  }
  size_t i = n;
  while (true) {
    while (i > 0 && space_at(i - 1)) --i;
    if (i == 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      size_t begin = 0;
      while (begin < i && space_at(begin)) ++begin;
      parts.emplace_back(s.substr(offsets[begin], offsets[i] - offsets[begin]));
      break;
    }
    size_t j = i;
    while (j > 0 && !space_at(j - 1)) --j;
    parts.emplace_back(s.substr(offsets[j], offsets[i] - offsets[j]));
    i = j;
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t pos = 0; pos < s.size();) {
    const size_t at = pos;
    const uint32_t cp = decode_utf8(s, pos);
    const bool brk = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || (cp >= 0x1C && cp <= 0x1E) || cp == 0x85 ||
                     cp == 0x2028 || cp == 0x2029;
    if (!brk) continue;
    if (cp == '\r' && pos < s.size() && s[pos] == '\n') ++pos;
    lines.emplace_back(s.substr(start, (keepends ? pos : at) - start));
    start = pos;
  }
  if (start < s.size()) lines.emplace_back(s.substr(start));
  return lines;
}

std::string replace(std::string_view s, std::string_view old, std::string_view with, int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `with` between characters and at both ends.
    const std::vector<size_t> offsets = char_offsets(s);
    int64_t done = 0;
    for (size_t i = 0; i + 1 < offsets.size(); ++i) {
      if (count < 0 || done < count) out += with, ++done;
      out += s.substr(offsets[i], offsets[i + 1] - offsets[i]);
    }
    if (count < 0 || done < count) out += with;
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(old, pos);
    if (hit == std::string_view::npos) break;
    out += s.substr(pos, hit - pos);
    out += with;
    pos = hit + old.size();
    ++done;
  }
  out += s.substr(pos);
  return out;
}

int64_t find(std::string_view s, std::string_view needle, bool from_right) {
  const size_t hit = from_right ? s.rfind(needle) : s.find(needle);
  if (hit == std::string_view::npos) return -1;
  return char_count(s.substr(0, hit));
}

bool is_alpha(std::string_view s) {
  const auto cps = decode(s);
  return !cps.empty() && std::all_of(cps.begin(), cps.end(), is_letter);
}

bool is_digit(std::string_view s) {
  const auto cps = decode(s);
  return !cps.empty() &&
         std::all_of(cps.begin(), cps.end(), [](uint32_t cp) { return u_isdigit(static_cast<UChar32>(cp)); });
}

bool is_upper(std::string_view s) {
  bool cased = false;
  for (uint32_t cp : decode(s)) {
    if (is_cased_lower(cp)) return false;
    cased |= is_cased_upper(cp);
  }
  return cased;
}

bool is_lower(std::string_view s) {
  bool cased = false;
  for (uint32_t cp : decode(s)) {
    if (is_cased_upper(cp)) return false;
    cased |= is_cased_lower(cp);
  }
  return cased;
}

}  // namespace kvslim::jinja::text
