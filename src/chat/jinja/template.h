// A parsed Jinja template and the one way to render it. Immutable after parsing, so one
// Template may render on several threads at once.
#pragma once

#include <ctime>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja/ast.h"

namespace kvslim::jinja {

class Template {
 public:
  // Throws kvslim::Error "ORIGIN line N: message" on a syntax error.
  Template(std::string source, std::string origin);

  // `variables` are the top-level names (messages, bos_token, ...), next to the globals.
  // Throws kvslim::Error "ORIGIN line N: message" on a runtime error or raise_exception().
  std::string render(const std::vector<std::pair<std::string, Value>>& variables, std::function<std::tm()> clock,
                     const Limits& limits = {}) const;

  const std::string& source() const { return source_; }
  const std::string& origin() const { return origin_; }

 private:
  std::string source_, origin_;
  Body body_;
};

}  // namespace kvslim::jinja
