#include "press/options.h"

#include <fmt/ranges.h>

#include <charconv>

#include "util/error.h"

namespace kvslim {

PressOptions::PressOptions(std::string method, const std::vector<OptionSpec>& specs,
                           const std::vector<std::string>& key_values)
    : method_(std::move(method)) {
  for (const auto& spec : specs) values_[spec.key] = spec.default_value;
  for (const auto& kv : key_values) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) fail("{}: option '{}' is not key=value", method_, kv);
    const std::string key = kv.substr(0, eq);
    if (!values_.count(key)) {
      std::vector<std::string> valid;
      for (const auto& spec : specs) valid.push_back(spec.key);
      if (valid.empty()) fail("{}: unknown option '{}' (this method has no options)", method_, key);
      fail("{}: unknown option '{}' (valid: {})", method_, key, fmt::join(valid, ", "));
    }
    values_[key] = kv.substr(eq + 1);
  }
}

const std::string& PressOptions::raw(const std::string& key) const {
  const auto it = values_.find(key);
  if (it == values_.end()) fail("{}: internal error: option '{}' is not declared", method_, key);
  return it->second;
}

int PressOptions::get_int(const std::string& key, int min, int max) const {
  const std::string& text = raw(key);
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size())
    fail("{}: option {}='{}' is not an integer", method_, key, text);
  if (value < min || value > max) fail("{}: option {}={} is out of range [{}, {}]", method_, key, value, min, max);
  return value;
}

double PressOptions::get_double(const std::string& key, double min, double max) const {
  const std::string& text = raw(key);
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size())
    fail("{}: option {}='{}' is not a number", method_, key, text);
  if (!(value >= min && value <= max)) fail("{}: option {}={} is out of range [{}, {}]", method_, key, value, min, max);
  return value;
}

bool PressOptions::get_bool(const std::string& key) const {
  const std::string& text = raw(key);
  if (text == "1" || text == "true" || text == "on") return true;
  if (text == "0" || text == "false" || text == "off") return false;
  fail("{}: option {}='{}' is not a boolean (true/false)", method_, key, text);
}

std::string PressOptions::get_choice(const std::string& key, const std::vector<std::string>& choices) const {
  const std::string& text = raw(key);
  for (const auto& c : choices)
    if (c == text) return text;
  fail("{}: option {}='{}' is not one of: {}", method_, key, text, fmt::join(choices, ", "));
}

std::string PressOptions::get_string(const std::string& key) const { return raw(key); }

}  // namespace kvslim
