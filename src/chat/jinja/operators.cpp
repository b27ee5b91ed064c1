#include "chat/jinja/operators.h"

#include <fmt/format.h>

#include <cmath>

#include "chat/jinja/access.h"
#include "chat/jinja/builtins.h"

namespace kvslim::jinja {

namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) undefined_error(a, "operator " + op);
  if (b.is_undefined()) undefined_error(b, "operator " + op);
  raise(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(), b.type_name()));
}

void check_overflow(bool overflow) {
  if (overflow) raise("integer overflow");
}

Value repeat(const Value& seq, int64_t times, Context& ctx) {
  if (times <= 0) return seq.is_string() ? Value::string("") : Value::list({});
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    ctx.produced(static_cast<size_t>(
                     std::min<int64_t>(times, INT64_MAX / std::max<int64_t>(1, static_cast<int64_t>(s.size())))) *
                 s.size());
    std::string out;
    out.reserve(s.size() * static_cast<size_t>(times));
    for (int64_t i = 0; i < times; ++i) out += s;
    return Value::string(std::move(out));
  }
  const auto& items = seq.items();
  ctx.produced(static_cast<size_t>(std::min<int64_t>(
                   times, INT64_MAX / 256 / std::max<int64_t>(1, static_cast<int64_t>(items.size())))) *
               items.size() * sizeof(Value));
  std::vector<Value> out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out), seq.is_tuple());
}

int64_t int_pow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) check_overflow(__builtin_mul_overflow(result, base, &result));
    exp >>= 1;
    if (exp) check_overflow(__builtin_mul_overflow(base, base, &base));
  }
  return result;
}

}  // namespace

Value negate(const Value& v) {
  if (v.is_float()) return Value::number(-v.as_double());
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) raise("integer overflow");
    return Value::integer(-v.as_int());
  }
  if (v.is_undefined()) undefined_error(v, "unary -");
  raise(fmt::format("bad operand type for unary -: '{}'", v.type_name()));
}

Value arithmetic(const std::string& op, const Value& a, const Value& b, Context& ctx) {
  if (op == "~") {
    std::string s = to_str(a) + to_str(b);
    ctx.produced(s.size());
    return Value::string(std::move(s));
  }
  const bool numbers = a.is_number() && b.is_number();
  const bool ints = numbers && !a.is_float() && !b.is_float();
  if (op == "+") {
    if (ints) {
      int64_t r = 0;
      check_overflow(__builtin_add_overflow(a.as_int(), b.as_int(), &r));
      return Value::integer(r);
    }
    if (numbers) return Value::number(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) {
      ctx.produced(a.as_string().size() + b.as_string().size());
      return Value::string(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list()) {
      ctx.produced((a.items().size() + b.items().size()) * sizeof(Value));
      std::vector<Value> items = a.items();
      items.insert(items.end(), b.items().begin(), b.items().end());
      return Value::list(std::move(items), a.is_tuple() && b.is_tuple());
    }
    unsupported(op, a, b);
  }
  if (op == "-") {
    if (ints) {
      int64_t r = 0;
      check_overflow(__builtin_sub_overflow(a.as_int(), b.as_int(), &r));
      return Value::integer(r);
    }
    if (numbers) return Value::number(a.as_double() - b.as_double());
    unsupported(op, a, b);
  }
  if (op == "*") {
    if (ints) {
      int64_t r = 0;
      check_overflow(__builtin_mul_overflow(a.as_int(), b.as_int(), &r));
      return Value::integer(r);
    }
    if (numbers) return Value::number(a.as_double() * b.as_double());
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(a, b.as_int(), ctx);
    if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(b, a.as_int(), ctx);
    unsupported(op, a, b);
  }
  if (op == "/") {
    if (!numbers) unsupported(op, a, b);
    if (b.as_double() == 0) raise("division by zero");
    return Value::number(a.as_double() / b.as_double());
  }
  if (op == "//" || (op == "%" && numbers)) {
    if (!numbers) unsupported(op, a, b);
    if (b.as_double() == 0) raise(op == "%" ? "modulo by zero" : "integer division or modulo by zero");
    if (ints) {
      const int64_t x = a.as_int(), y = b.as_int();
      if (x == INT64_MIN && y == -1) raise("integer overflow");
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) --q, r += y;  // floor, as Python
      return Value::integer(op == "//" ? q : r);
    }
    const double x = a.as_double(), y = b.as_double();
    if (op == "//") return Value::number(std::floor(x / y));
    double r = std::fmod(x, y);
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return Value::number(r);
  }
  if (op == "%") {
    if (a.is_string()) {
      std::string s = percent_format(a.as_string(), b.is_list() && b.is_tuple() ? b.items() : std::vector<Value>{b});
      ctx.produced(s.size());
      return Value::string(std::move(s));
    }
    unsupported(op, a, b);
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) return Value::integer(int_pow(a.as_int(), b.as_int()));
    if (numbers) return Value::number(std::pow(a.as_double(), b.as_double()));
    unsupported(op, a, b);
  }
  raise("unknown operator " + op);
}

bool compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return equals(a, b);
  if (op == "!=") return !equals(a, b);
  if (op == "in") return contains(b, a);
  if (op == "not in") return !contains(b, a);
  if (a.is_undefined()) undefined_error(a, "comparison " + op);
  if (b.is_undefined()) undefined_error(b, "comparison " + op);
  if (op == "<") return less(a, b);
  if (op == ">") return less(b, a);
  if (op == "<=") return !less(b, a);
  if (op == ">=") return !less(a, b);
  raise("unknown comparison " + op);
}

}  // namespace kvslim::jinja
