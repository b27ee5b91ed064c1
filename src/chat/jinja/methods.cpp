// Methods of strings, dicts and lists that chat templates call (`content.split('</think>')`,
// `message.get('x')`, `tool.items()`), with Python's semantics.
#include <fmt/format.h>

#include "chat/jinja/access.h"
#include "chat/jinja/builtins.h"
#include "chat/jinja/text.h"

namespace kvslim::jinja {

const std::string& expect_string(const Value& v, const char* what) {
  if (!v.is_string()) {
    if (v.is_undefined()) undefined_error(v, what);
    raise(fmt::format("{} must be a string, not {}", what, v.type_name()));
  }
  return v.as_string();
}

int64_t expect_int(const Value& v, const char* what) {
  if (!v.is_int() && !v.is_bool()) {
    if (v.is_undefined()) undefined_error(v, what);
    raise(fmt::format("{} must be an integer, not {}", what, v.type_name()));
  }
  return v.as_int();
}

Value attribute_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (cur.is_undefined()) return cur;
    const bool numeric = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    cur = numeric ? get_item(cur, Value::integer(std::stoll(part))) : get_item(cur, Value::string(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

namespace {

Value strip_impl(const Value& self, CallArgs& args, bool left, bool right) {
  args.expect("strip", 1, {"chars"});
  const Value c = args.get(0, "chars");
  const std::string* chars = c.is_undefined() || c.is_none() ? nullptr : &expect_string(c, "strip() chars");
  return Value::string(text::strip(self.as_string(), chars, left, right));
}

Value split_impl(const Value& self, CallArgs& args, bool from_right) {
  args.expect("split", 2, {"sep", "maxsplit"});
  const Value sep = args.get(0, "sep");
  const int64_t maxsplit = expect_int(args.get(1, "maxsplit", Value::integer(-1)), "split() maxsplit");
  std::vector<Value> parts;
  const std::string* sep_ptr = sep.is_undefined() || sep.is_none() ? nullptr : &expect_string(sep, "split() separator");
  for (auto& p : text::split(self.as_string(), sep_ptr, maxsplit, from_right))
    parts.push_back(Value::string(std::move(p)));
  return Value::list(std::move(parts));
}

// startswith/endswith accept one string or a tuple/list of them.
Value affix_impl(const Value& self, CallArgs& args, bool prefix) {
  args.expect(prefix ? "startswith" : "endswith", 1);
  const Value arg = args.get(0, "affix");
  std::vector<Value> options = arg.is_list() ? arg.items() : std::vector<Value>{arg};
  const std::string& s = self.as_string();
  for (const Value& o : options) {
    const std::string& a = expect_string(o, prefix ? "startswith() argument" : "endswith() argument");
    if (a.size() <= s.size() &&
        (prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0))
      return Value::boolean(true);
  }
  return Value::boolean(false);
}

// str.format with {}, {0} and {name} fields (no format specs).
Value str_format(const Value& self, CallArgs& args, Context& ctx) {
  const std::string& f = self.as_string();
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if (c == '{' && i + 1 < f.size() && f[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (c == '}' && i + 1 < f.size() && f[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (c == '{') {
      const size_t close = f.find('}', i);
      if (close == std::string::npos) raise("format(): single '{' encountered in format string");
      const std::string field = f.substr(i + 1, close - i - 1);
      if (field.find_first_of(":!") != std::string::npos) raise("format(): format specs are not supported");
      Value v;
      if (field.empty()) {
        if (auto_index >= args.positional.size()) raise("format(): not enough arguments");
        v = args.positional[auto_index++];
      } else if (field.find_first_not_of("0123456789") == std::string::npos) {
        const size_t k = std::stoul(field);
        if (k >= args.positional.size()) raise("format(): not enough arguments");
        v = args.positional[k];
      } else {
        v = args.get(SIZE_MAX, field.c_str());
        if (v.is_undefined()) raise(fmt::format("format(): no argument named '{}'", field));
      }
      out += to_str(v);
      i = close;
    } else if (c == '}') {
      raise("format(): single '}' encountered in format string");
    } else {
      out += c;
    }
  }
  ctx.produced(out.size());
  return Value::string(std::move(out));
}

Value str_method(const Value& self, const std::string& name, CallArgs& args, Context& ctx) {
  const std::string& s = self.as_string();
  if (name == "strip") return strip_impl(self, args, true, true);
  if (name == "lstrip") return strip_impl(self, args, true, false);
  if (name == "rstrip") return strip_impl(self, args, false, true);
  if (name == "split") return split_impl(self, args, false);
  if (name == "rsplit") return split_impl(self, args, true);
  if (name == "startswith") return affix_impl(self, args, true);
  if (name == "endswith") return affix_impl(self, args, false);
  if (name == "format") return str_format(self, args, ctx);
  if (name == "splitlines") {
    args.expect("splitlines", 1, {"keepends"});
    std::vector<Value> lines;
    for (auto& l : text::splitlines(s, args.get(0, "keepends").truthy())) lines.push_back(Value::string(std::move(l)));
    return Value::list(std::move(lines));
  }
  if (name == "replace") {
    args.expect("replace", 3, {"count"});
    const std::string& old = expect_string(args.get(0, "old"), "replace() old");
    const std::string& with = expect_string(args.get(1, "new"), "replace() new");
    std::string out =
        text::replace(s, old, with, expect_int(args.get(2, "count", Value::integer(-1)), "replace() count"));
    ctx.produced(out.size());
    return Value::string(std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    args.expect(name.c_str(), 1);
    const int64_t at = text::find(s, expect_string(args.get(0, "sub"), "find() argument"), name[0] == 'r');
    if (at < 0 && (name == "index" || name == "rindex")) raise("substring not found");
    return Value::integer(at);
  }
  if (name == "count") {
    args.expect("count", 1);
    const std::string& sub = expect_string(args.get(0, "sub"), "count() argument");
    if (sub.empty()) return Value::integer(text::char_count(s) + 1);
    int64_t n = 0;
    for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
    return Value::integer(n);
  }
  if (name == "join") {
    args.expect("join", 1);
    std::string out;
    bool first = true;
    for (const Value& v : iterate(args.get(0, "iterable"))) {
      if (!first) out += s;
      first = false;
      out += expect_string(v, "join() item");
      ctx.produced(out.size());
    }
    return Value::string(std::move(out));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    args.expect(name.c_str(), 1);
    const std::string& a = expect_string(args.get(0, "affix"), (name + "() argument").c_str());
    if (name == "removeprefix") return Value::string(s.compare(0, a.size(), a) == 0 ? s.substr(a.size()) : s);
    return Value::string(a.size() <= s.size() && s.compare(s.size() - a.size(), a.size(), a) == 0
                             ? s.substr(0, s.size() - a.size())
                             : s);
  }
  args.expect(name.c_str(), 0);
  if (name == "upper") return Value::string(text::upper(s));
  if (name == "lower") return Value::string(text::lower(s));
  if (name == "title") return Value::string(text::title(s));
  if (name == "capitalize") return Value::string(text::capitalize(s));
  if (name == "isdigit") return Value::boolean(text::is_digit(s));
  if (name == "isalpha") return Value::boolean(text::is_alpha(s));
  if (name == "isupper") return Value::boolean(text::is_upper(s));
  if (name == "islower") return Value::boolean(text::is_lower(s));
  if (name == "isspace") return Value::boolean(!s.empty() && text::strip(s, nullptr, true, false).empty());
  raise("no method " + name);
}

Value dict_method(const Value& self, const std::string& name, CallArgs& args, Context&) {
  const DictData& d = self.dict_data();
  if (name == "get") {
    args.expect("get", 2);
    const Value key = args.get(0, "key");
    const Value* v = key.is_string() ? d.find(key.as_string()) : nullptr;
    return v ? *v : args.get(1, "default", Value::none());
  }
  args.expect(name.c_str(), 0);
  std::vector<Value> out;
  out.reserve(d.entries.size());
  for (const auto& [key, value] : d.entries) {
    if (name == "items")
      out.push_back(Value::list({Value::string(key), value}, true));
    else if (name == "keys")
      out.push_back(Value::string(key));
    else
      out.push_back(value);
  }
  return Value::list(std::move(out));
}

Value list_method(const Value& self, const std::string& name, CallArgs& args, Context&) {
  args.expect(name.c_str(), 1);
  const Value x = args.get(0, "value");
  const auto& items = self.items();
  int64_t count = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!equals(items[i], x)) continue;
    if (name == "index") return Value::integer(static_cast<int64_t>(i));
    ++count;
  }
  if (name == "index") raise(fmt::format("{} is not in list", to_repr(x)));
  return Value::integer(count);
}

bool is_one_of(const std::string& name, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (name == n) return true;
  return false;
}

}  // namespace

Value find_method(const Value& object, const std::string& name) {
  using F = Value (*)(const Value&, const std::string&, CallArgs&, Context&);
  F impl = nullptr;
  if (object.is_string() &&
      is_one_of(name, {"strip",      "lstrip",  "rstrip",       "split",        "rsplit",  "splitlines", "startswith",
                       "endswith",   "format",  "replace",      "find",         "rfind",   "index",      "rindex",
                       "count",      "join",    "removeprefix", "removesuffix", "upper",   "lower",      "title",
                       "capitalize", "isdigit", "isalpha",      "isupper",      "islower", "isspace"}))
    impl = str_method;
  else if (object.is_dict() && is_one_of(name, {"get", "items", "keys", "values"}))
    impl = dict_method;
  else if (object.is_list() && is_one_of(name, {"index", "count"}))
    impl = list_method;
  if (!impl) return Value::undefined();
  return Value::callable(name,
                         [object, name, impl](CallArgs& args, Context& ctx) { return impl(object, name, args, ctx); });
}

Value call_value(const Value& callee, CallArgs& args, Context& ctx) {
  if (callee.is_callable()) return callee.callable_data().fn(args, ctx);
  if (callee.is_undefined()) undefined_error(callee, "calling it");
  raise(fmt::format("'{}' object is not callable", callee.type_name()));
}

}  // namespace kvslim::jinja
