#include "train/curriculum.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "util/error.h"

namespace kvslim::train {

namespace {

int64_t parse_count(const std::string& text, const std::string& stage) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value <= 0)
    fail("curriculum stage '{}': '{}' is not a positive integer", stage, text);
  return value;
}

// The spec with every "(GROUP)xN" written out as GROUP N times, comma-separated.
std::string expand_repeats(const std::string& spec) {
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t open = spec.find_first_of("()", pos);
    if (open == std::string::npos) return out + spec.substr(pos);
    if (spec[open] == ')') fail("curriculum '{}': ')' without '('", spec);
    const size_t close = spec.find_first_of("()", open + 1);
    if (close == std::string::npos) fail("curriculum '{}': '(' without ')'", spec);
    if (spec[close] == '(') fail("curriculum '{}': repeated groups cannot nest", spec);
    const std::string group = spec.substr(open + 1, close - open - 1);
    if (close + 1 >= spec.size() || spec[close + 1] != 'x')
      fail("curriculum '{}': a group '({})' needs its repeat count, as '({})x3'", spec, group, group);
    const size_t count_end = std::min(spec.find(',', close), spec.size());
    const int64_t repeats = parse_count(spec.substr(close + 2, count_end - close - 2), "(" + group + ")x");
    out += spec.substr(pos, open - pos);
    for (int64_t r = 0; r < repeats; ++r) out += (r > 0 ? "," : "") + group;
    pos = count_end;
  }
}

}  // namespace

Curriculum Curriculum::parse(const std::string& written_spec) {
  const std::string spec = expand_repeats(written_spec);  // every stage written out
  Curriculum c;
  size_t begin = 0;
  while (begin <= spec.size()) {
    const size_t comma = std::min(spec.find(',', begin), spec.size());
    const std::string stage = spec.substr(begin, comma - begin);
    const size_t colon = stage.find(':');
    Stage s;
    s.length = parse_count(stage.substr(0, colon), stage);
    if (colon != std::string::npos) s.steps = parse_count(stage.substr(colon + 1), stage);
    c.stages_.push_back(s);
    begin = comma + 1;
  }
  for (size_t i = 0; i + 1 < c.stages_.size(); ++i)
    if (c.stages_[i].steps == 0)
      fail("curriculum '{}': every stage but the last needs a step count (LENGTH:STEPS)", spec);
  return c;
}

int64_t Curriculum::length_at(int64_t step) const {
  for (const Stage& s : stages_) {
    if (s.steps == 0 || step < s.steps) return s.length;
    step -= s.steps;
  }
  return stages_.back().length;  // past the last counted stage: stay there
}

int64_t Curriculum::max_length() const {
  int64_t m = 0;
  for (const Stage& s : stages_) m = std::max(m, s.length);
  return m;
}

std::string Curriculum::to_string() const {
  std::string out;
  for (const Stage& s : stages_) {
    if (!out.empty()) out += ',';
    out += s.steps > 0 ? fmt::format("{}:{}", s.length, s.steps) : fmt::format("{}", s.length);
  }
  return out;
}

}  // namespace kvslim::train
