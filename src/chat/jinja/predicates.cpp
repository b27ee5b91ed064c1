// Jinja2's tests (`x is defined`, `x is mapping`, `x is equalto y`, ...). Type tests answer
// as Jinja2 does on Python values: a dict is a sequence, undefined is an iterable sequence, True
// is a number but not an integer.
#include <fmt/format.h>

#include <cmath>
#include <string_view>

#include "chat/jinja/access.h"

#include "chat/jinja/builtins.h"
#include "chat/jinja/operators.h"
#include "chat/jinja/text.h"

namespace kvslim::jinja {

namespace {

Value arg(CallArgs& args, const char* test) {
  if (args.positional.size() != 1 || !args.keyword.empty()) raise(fmt::format("test '{}' takes one argument", test));
  return args.positional[0];
}

void no_args(CallArgs& args, const char* test) {
  if (!args.positional.empty() || !args.keyword.empty()) raise(fmt::format("test '{}' takes no argument", test));
}

#define KVSLIM_TEST0(fn_name, test_name, expr)             \
  bool fn_name(const Value& v, CallArgs& args, Context&) { \
    no_args(args, test_name);                              \
    return (expr);                                         \
  }

KVSLIM_TEST0(t_defined, "defined", !v.is_undefined())
KVSLIM_TEST0(t_undefined, "undefined", v.is_undefined())
KVSLIM_TEST0(t_none, "none", v.is_none())
KVSLIM_TEST0(t_boolean, "boolean", v.is_bool())
KVSLIM_TEST0(t_true, "true", v.is_bool() && v.as_bool())
KVSLIM_TEST0(t_false, "false", v.is_bool() && !v.as_bool())
KVSLIM_TEST0(t_integer, "integer", v.is_int())
KVSLIM_TEST0(t_float, "float", v.is_float())
KVSLIM_TEST0(t_number, "number", v.is_number())
KVSLIM_TEST0(t_string, "string", v.is_string())
KVSLIM_TEST0(t_mapping, "mapping", v.is_dict())
KVSLIM_TEST0(t_iterable, "iterable", v.is_string() || v.is_list() || v.is_dict() || v.is_undefined())
KVSLIM_TEST0(t_sequence, "sequence", v.is_string() || v.is_list() || v.is_dict() || v.is_undefined())
KVSLIM_TEST0(t_callable, "callable", v.is_callable())
KVSLIM_TEST0(t_escaped, "escaped", false)
KVSLIM_TEST0(t_lower, "lower", text::is_lower(to_str(v)))
KVSLIM_TEST0(t_upper, "upper", text::is_upper(to_str(v)))
#undef KVSLIM_TEST0

// Python's `value % 2 == 1` / `== 0`, so floats work too.
double python_mod2(const Value& v, const char* test) {
  if (!v.is_number()) {
    if (v.is_undefined()) undefined_error(v, test);
    raise(fmt::format("{}: expected a number, not {}", test, v.type_name()));
  }
  if (!v.is_float()) return static_cast<double>(((v.as_int() % 2) + 2) % 2);
  const double r = std::fmod(v.as_double(), 2.0);
  return r < 0 ? r + 2.0 : r;
}
bool t_odd(const Value& v, CallArgs& args, Context&) {
  no_args(args, "odd");
  return python_mod2(v, "odd test") == 1.0;
}
bool t_even(const Value& v, CallArgs& args, Context&) {
  no_args(args, "even");
  return python_mod2(v, "even test") == 0.0;
}
bool t_divisibleby(const Value& v, CallArgs& args, Context&) {
  const int64_t d = expect_int(arg(args, "divisibleby"), "divisibleby argument");
  if (d == 0) raise("divisibleby 0");
  return expect_int(v, "divisibleby test") % d == 0;
}
bool t_sameas(const Value& v, CallArgs& args, Context&) { return same_object(v, arg(args, "sameas")); }
bool t_in(const Value& v, CallArgs& args, Context&) { return contains(arg(args, "in"), v); }

#define KVSLIM_CMP(fn_name, op) \
  bool fn_name(const Value& v, CallArgs& args, Context&) { return compare(op, v, arg(args, op)); }
KVSLIM_CMP(t_eq, "==")
KVSLIM_CMP(t_ne, "!=")
KVSLIM_CMP(t_lt, "<")
KVSLIM_CMP(t_le, "<=")
KVSLIM_CMP(t_gt, ">")
KVSLIM_CMP(t_ge, ">=")
#undef KVSLIM_CMP

bool t_filter(const Value& v, CallArgs& args, Context&) {
  no_args(args, "filter");
  return v.is_string() && find_filter(v.as_string()) != nullptr;
}
bool t_test(const Value& v, CallArgs& args, Context&) {
  no_args(args, "test");
  return v.is_string() && find_test(v.as_string()) != nullptr;
}

struct Entry {
  std::string_view name;
  TestFn fn;
};

constexpr Entry kTests[] = {
    {"defined", t_defined},
    {"undefined", t_undefined},
    {"none", t_none},
    {"boolean", t_boolean},
    {"true", t_true},
    {"false", t_false},
    {"integer", t_integer},
    {"float", t_float},
    {"number", t_number},
    {"string", t_string},
    {"mapping", t_mapping},
    {"iterable", t_iterable},
    {"sequence", t_sequence},
    {"callable", t_callable},
    {"escaped", t_escaped},
    {"lower", t_lower},
    {"upper", t_upper},
    {"odd", t_odd},
    {"even", t_even},
    {"divisibleby", t_divisibleby},
    {"sameas", t_sameas},
    {"in", t_in},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"==", t_eq},
    {"ne", t_ne},
    {"!=", t_ne},
    {"lt", t_lt},
    {"lessthan", t_lt},
    {"<", t_lt},
    {"le", t_le},
    {"<=", t_le},
    {"gt", t_gt},
    {"greaterthan", t_gt},
    {">", t_gt},
    {"ge", t_ge},
    {">=", t_ge},
    {"filter", t_filter},
    {"test", t_test},
};

}  // namespace

TestFn find_test(std::string_view name) {
  for (const Entry& e : kTests)
    if (e.name == name) return e.fn;
  return nullptr;
}

}  // namespace kvslim::jinja
