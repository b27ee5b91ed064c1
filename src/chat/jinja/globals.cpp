// The global functions of the Hugging Face chat-template environment, and printf-style string
// formatting (`"%s" | format(x)`, `"%d" % n`).
#include <fmt/format.h>
#include <fmt/printf.h>

#include <ctime>

#include "chat/jinja/builtins.h"

namespace kvslim::jinja {

namespace {

constexpr int64_t kMaxRange = 100'000;

Value g_range(CallArgs& args, Context& ctx) {
  args.expect("range", 3);
  if (args.positional.empty()) raise("range expected at least 1 argument, got 0");
  int64_t start = 0, stop, step = 1;
  if (args.positional.size() == 1) {
    stop = expect_int(args.positional[0], "range() argument");
  } else {
    start = expect_int(args.positional[0], "range() start");
    stop = expect_int(args.positional[1], "range() stop");
    if (args.positional.size() == 3) step = expect_int(args.positional[2], "range() step");
  }
  if (step == 0) raise("range() arg 3 must not be zero");
  const long double count =
      step > 0 ? (static_cast<long double>(stop) - start) / step : (static_cast<long double>(start) - stop) / -step;
  if (count > kMaxRange) raise(fmt::format("range() of over {} numbers", kMaxRange));
  std::vector<Value> out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(Value::integer(i));
  ctx.produced(out.size() * sizeof(Value));
  return Value::list(std::move(out));
}

// dict(mapping?, **kwargs) and namespace(mapping?, **kwargs).
std::shared_ptr<DictData> mapping_from(CallArgs& args, const char* function) {
  args.expect(function, 1, {});
  auto d = std::make_shared<DictData>();
  if (!args.positional.empty()) {
    const Value& m = args.positional[0];
    if (m.is_dict() || m.is_namespace()) {
      for (const auto& [key, value] : m.dict_data().entries) d->set(key, value);
    } else if (m.is_list()) {
      for (const Value& pair : m.items()) {
        if (!pair.is_list() || pair.items().size() != 2 || !pair.items()[0].is_string())
          raise(fmt::format("{}(): expected (key, value) pairs with string keys", function));
        d->set(pair.items()[0].as_string(), pair.items()[1]);
      }
    } else {
      raise(fmt::format("{}(): cannot build a mapping from {}", function, m.type_name()));
    }
  }
  for (const auto& [key, value] : args.keyword) d->set(key, value);
  return d;
}

Value g_dict(CallArgs& args, Context&) {
  // dict() accepts any keyword, so only the positional count is checked here.
  CallArgs positional_only{args.positional, {}};
  auto d = mapping_from(positional_only, "dict");
  for (const auto& [key, value] : args.keyword) d->set(key, value);
  return Value::dict(std::move(d));
}

Value g_namespace(CallArgs& args, Context& ctx) {
  CallArgs positional_only{args.positional, {}};
  auto d = mapping_from(positional_only, "namespace");
  for (const auto& [key, value] : args.keyword) d->set(key, value);
  ctx.track_namespace(d);
  return Value::namespace_(std::move(d));
}

Value g_raise_exception(CallArgs& args, Context&) {
  if (args.positional.size() != 1) raise("raise_exception() takes one argument (the message)");
  raise(to_str(args.positional[0]));
}

Value g_strftime_now(CallArgs& args, Context& ctx) {
  args.expect("strftime_now", 1);
  const std::string& format = expect_string(args.get(0, "format"), "strftime_now() format");
  if (format.size() > 256) raise("strftime_now() format longer than 256 characters");
  if (format.empty()) return Value::string("");
  const std::tm now = ctx.now();
  std::string buf(format.size() * 32 + 64, '\0');
  const size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &now);
  if (n == 0) raise("strftime_now(): the formatted date is empty or too long");
  buf.resize(n);
  return Value::string(std::move(buf));
}

}  // namespace

void add_globals(Context::Frame& frame) {
  frame.vars["range"] = Value::callable("range", g_range);
  frame.vars["dict"] = Value::callable("dict", g_dict);
  frame.vars["namespace"] = Value::callable("namespace", g_namespace);
  frame.vars["raise_exception"] = Value::callable("raise_exception", g_raise_exception);
  frame.vars["strftime_now"] = Value::callable("strftime_now", g_strftime_now);
}

std::string percent_format(const std::string& f, const std::vector<Value>& args) {
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out += f[i];
      continue;
    }
    if (++i == f.size()) raise("incomplete format");
    // flags, width, precision (no '*'), then the conversion.
    std::string spec;
    while (i < f.size() && std::string_view("-+ 0#").find(f[i]) != std::string_view::npos) spec += f[i++];
    while (i < f.size() && std::isdigit(static_cast<unsigned char>(f[i]))) spec += f[i++];
    if (i < f.size() && f[i] == '.') {
      spec += f[i++];
      while (i < f.size() && std::isdigit(static_cast<unsigned char>(f[i]))) spec += f[i++];
    }
    if (i == f.size()) raise("incomplete format");
    if (spec.size() > 8) raise("format spec too long");
    const char conv = f[i];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (next >= args.size()) raise("not enough arguments for format string");
    const Value& v = args[next++];
    switch (conv) {
      case 's':
      case 'r': {
        std::string piece = conv == 's' ? to_str(v) : to_repr(v);
        const size_t dot = spec.find('.');
        const std::string flags_width = spec.substr(0, dot);
        if (dot != std::string::npos) {
          const std::string precision = spec.substr(dot + 1);
          piece = piece.substr(0, precision.empty() ? 0 : std::stoul(precision));
        }
        const size_t digits = flags_width.find_first_of("123456789");
        const size_t width =
            digits == std::string::npos ? 0 : std::min<size_t>(std::stoul(flags_width.substr(digits)), 4096);
        const bool left = flags_width.find('-') != std::string::npos;
        if (piece.size() < width)
          piece =
              left ? piece + std::string(width - piece.size(), ' ') : std::string(width - piece.size(), ' ') + piece;
        out += piece;
        break;
      }
      case 'd':
      case 'i': {
        if (!v.is_number()) raise(fmt::format("%d format: a number is required, not {}", v.type_name()));
        const auto i64 = v.is_float() ? static_cast<long long>(v.as_double()) : static_cast<long long>(v.as_int());
        out += fmt::sprintf("%" + spec + "lld", i64);
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G':
        if (!v.is_number()) raise(fmt::format("%{} format: a number is required, not {}", conv, v.type_name()));
        out += fmt::sprintf("%" + spec + conv, v.as_double());
        break;
      default: raise(fmt::format("unsupported format character '{}'", conv));
    }
  }
  if (next < args.size()) raise("not all arguments converted during string formatting");
  return out;
}

}  // namespace kvslim::jinja
