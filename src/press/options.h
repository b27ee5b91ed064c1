// Options of a method: `--press-opt key=value` strings checked against the method's declared
// options, with typed, range-checked getters. Every error names the method, the key and what
// is allowed.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace kvslim {

struct OptionSpec {
  std::string key;
  std::string default_value;
  std::string help;
};

class PressOptions {
 public:
  // Throws kvslim::Error for a key the method does not declare (listing the valid ones) or a
  // malformed `key=value`.
  PressOptions(std::string method, const std::vector<OptionSpec>& specs, const std::vector<std::string>& key_values);
  // All defaults.
  PressOptions(std::string method, const std::vector<OptionSpec>& specs) : PressOptions(std::move(method), specs, {}) {}

  int get_int(const std::string& key, int min, int max) const;
  double get_double(const std::string& key, double min, double max) const;
  bool get_bool(const std::string& key) const;
  std::string get_choice(const std::string& key, const std::vector<std::string>& choices) const;
  std::string get_string(const std::string& key) const;

  const std::string& method() const { return method_; }

 private:
  const std::string& raw(const std::string& key) const;
  std::string method_;
  std::map<std::string, std::string> values_;
};

}  // namespace kvslim
