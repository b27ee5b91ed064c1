#include "chat/jinja/template.h"

#include <fmt/format.h>

#include "chat/jinja/builtins.h"
#include "chat/jinja/lexer.h"
#include "chat/jinja/parser.h"
#include "util/error.h"

namespace kvslim::jinja {

namespace {

[[noreturn]] void rethrow(const std::string& origin, const TemplateError& e, const char* kind) {
  if (e.line > 0) fail("{} line {}: {}{}", origin, e.line, kind, e.what());
  fail("{}: {}{}", origin, kind, e.what());
}

}  // namespace

Template::Template(std::string source, std::string origin) : source_(std::move(source)), origin_(std::move(origin)) {
  try {
    body_ = parse(tokenize(source_));
  } catch (const TemplateError& e) {
    rethrow(origin_, e, "syntax error: ");
  }
}

std::string Template::render(const std::vector<std::pair<std::string, Value>>& variables,
                             std::function<std::tm()> clock, const Limits& limits) const {
  Context ctx(limits, std::move(clock));
  add_globals(ctx.root());
  for (const auto& [name, value] : variables) ctx.root().vars[name] = value;
  std::string out;
  ctx.set_out(&out);
  try {
    execute(body_, ctx);
  } catch (const TemplateError& e) {
    rethrow(origin_, e, "");
  }
  return out;
}

}  // namespace kvslim::jinja
