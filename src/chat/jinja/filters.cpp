// Jinja2's built-in filters that chat templates use, plus the Hugging Face `tojson`
// (json.dumps(x, ensure_ascii=False, indent=...)). Where Jinja2 returns a generator (map,
// select, unique, ...) we return a list: templates only ever iterate, join or |list them.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string_view>

#include "chat/jinja/access.h"
#include "chat/jinja/builtins.h"
#include "chat/jinja/json.h"
#include "chat/jinja/text.h"

namespace kvslim::jinja {

namespace {

Value str_value(std::string s, Context& ctx) {
  ctx.produced(s.size());
  return Value::string(std::move(s));
}

// The Hugging Face tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value f_tojson(const Value& v, CallArgs& args, Context& ctx) {
  args.expect("tojson", 4, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonStyle style;
  // Positional arguments follow that signature (Jinja2's own tojson(indent) is replaced).
  const Value ensure_ascii = args.get(0, "ensure_ascii"), indent = args.get(1, "indent");
  const Value separators = args.get(2, "separators"), sort_keys = args.get(3, "sort_keys");
  style.ensure_ascii = ensure_ascii.truthy();
  style.sort_keys = sort_keys.truthy();
  if (!indent.is_undefined() && !indent.is_none()) {
    style.indent = static_cast<int>(std::clamp<int64_t>(expect_int(indent, "tojson indent"), -1, 64));
    if (style.indent < 0) raise("tojson indent must be between 0 and 64");
  }
  if (!separators.is_undefined() && !separators.is_none()) {
    if (!separators.is_list() || separators.items().size() != 2) raise("tojson separators must be a pair of strings");
    style.item_separator = expect_string(separators.items()[0], "tojson item separator");
    style.key_separator = expect_string(separators.items()[1], "tojson key separator");
  }
  return str_value(to_json(v, style), ctx);
}

Value f_trim(const Value& v, CallArgs& args, Context& ctx) {
  args.expect("trim", 1, {"chars"});
  const Value chars = args.get(0, "chars");
  std::string storage;
  const std::string* set = nullptr;
  if (!chars.is_undefined() && !chars.is_none()) set = &(storage = expect_string(chars, "trim chars"));
  return Value::string(text::strip(to_str(v), set, true, true));
}

Value f_length(const Value& v, CallArgs& args, Context&) {
  args.expect("length", 0);
  return Value::integer(length(v));
}

Value f_upper(const Value& v, CallArgs& args, Context&) {
  args.expect("upper", 0);
  return Value::string(text::upper(to_str(v)));
}
Value f_lower(const Value& v, CallArgs& args, Context&) {
  args.expect("lower", 0);
  return Value::string(text::lower(to_str(v)));
}
Value f_capitalize(const Value& v, CallArgs& args, Context&) {
  args.expect("capitalize", 0);
  return Value::string(text::capitalize(to_str(v)));
}
Value f_title(const Value& v, CallArgs& args, Context&) {
  args.expect("title", 0);
  return Value::string(text::title_filter(to_str(v)));
}

Value f_replace(const Value& v, CallArgs& args, Context& ctx) {
  args.expect("replace", 3, {"old", "new", "count"});
  const std::string old = to_str(args.get(0, "old"));
  const std::string with = to_str(args.get(1, "new"));
  const Value count = args.get(2, "count");
  return str_value(text::replace(to_str(v), old, with,
                                 count.is_undefined() || count.is_none() ? -1 : expect_int(count, "replace count")),
                   ctx);
}

std::vector<Value> attribute_values(const std::vector<Value>& items, const Value& attribute) {
  if (attribute.is_undefined() || attribute.is_none()) return items;
  const std::string path = to_str(attribute);
  std::vector<Value> out;
  out.reserve(items.size());
  for (const Value& item : items) out.push_back(attribute_path(item, path));
  return out;
}

Value f_join(const Value& v, CallArgs& args, Context& ctx) {
  args.expect("join", 2, {"d", "attribute"});
  const std::string sep = to_str(args.get(0, "d", Value::string("")));
  std::string out;
  bool first = true;
  for (const Value& item : attribute_values(iterate(v), args.get(1, "attribute"))) {
    if (!first) out += sep;
    first = false;
    out += to_str(item);
    ctx.produced(out.size());
  }
  return Value::string(std::move(out));
}

Value f_default(const Value& v, CallArgs& args, Context&) {
  args.expect("default", 2, {"default_value", "boolean"});
  const bool boolean = args.get(1, "boolean").truthy();
  if (v.is_undefined() || (boolean && !v.truthy())) return args.get(0, "default_value", Value::string(""));
  return v;
}

Value f_first(const Value& v, CallArgs& args, Context&) {
  args.expect("first", 0);
  const auto items = iterate(v);
  return items.empty() ? Value::undefined("first of an empty sequence") : items.front();
}

Value f_last(const Value& v, CallArgs& args, Context&) {
  args.expect("last", 0);
  const auto items = iterate(v);
  return items.empty() ? Value::undefined("last of an empty sequence") : items.back();
}

Value f_items(const Value& v, CallArgs& args, Context&) {
  args.expect("items", 0);
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict()) raise(fmt::format("items: can only get item pairs from a mapping, not {}", v.type_name()));
  std::vector<Value> out;
  for (const auto& [key, value] : v.dict_data().entries) out.push_back(Value::list({Value::string(key), value}, true));
  return Value::list(std::move(out));
}

Value f_list(const Value& v, CallArgs& args, Context&) {
  args.expect("list", 0);
  return Value::list(iterate(v));
}

Value f_string(const Value& v, CallArgs& args, Context&) {
  args.expect("string", 0);
  return Value::string(to_str(v));
}

Value f_safe(const Value& v, CallArgs& args, Context&) {
  args.expect("safe", 0);
  return Value::string(to_str(v));  // Markup(v): a string; no autoescaping, so nothing else changes
}

Value f_escape(const Value& v, CallArgs& args, Context& ctx) {
  args.expect("escape", 0);
  std::string out;
  for (char c : to_str(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return str_value(std::move(out), ctx);
}

// Python's int(): strings as Jinja2's int filter reads them (int, else via float), else default.
Value f_int(const Value& v, CallArgs& args, Context&) {
  args.expect("int", 2, {"default", "base"});
  const Value fallback = args.get(0, "default", Value::integer(0));
  const int64_t base = expect_int(args.get(1, "base", Value::integer(10)), "int base");
  if (v.is_int() || v.is_bool()) return Value::integer(v.as_int());
  if (v.is_float()) {
    const double f = v.as_double();
    if (!std::isfinite(f) || std::fabs(f) >= 9.2e18) return fallback;
    return Value::integer(static_cast<int64_t>(f));
  }
  if (!v.is_string()) return fallback;
  const std::string s = text::strip(v.as_string(), nullptr, true, true);
  if (s.empty()) return fallback;
  errno = 0;
  char* end = nullptr;
  const long long i = std::strtoll(s.c_str(), &end, static_cast<int>(base));
  if (errno == 0 && end && *end == '\0') return Value::integer(i);
  if (base != 10) return fallback;
  const double f = std::strtod(s.c_str(), &end);
  if (!end || *end != '\0' || !std::isfinite(f) || std::fabs(f) >= 9.2e18) return fallback;
  return Value::integer(static_cast<int64_t>(f));
}

Value f_float(const Value& v, CallArgs& args, Context&) {
  args.expect("float", 1, {"default"});
  const Value fallback = args.get(0, "default", Value::number(0.0));
  if (v.is_number()) return Value::number(v.as_double());
  if (!v.is_string()) return fallback;
  const std::string s = text::strip(v.as_string(), nullptr, true, true);
  char* end = nullptr;
  const double f = std::strtod(s.c_str(), &end);
  if (s.empty() || !end || *end != '\0') return fallback;
  return Value::number(f);
}

Value f_abs(const Value& v, CallArgs& args, Context&) {
  args.expect("abs", 0);
  if (v.is_float()) return Value::number(std::fabs(v.as_double()));
  const int64_t i = expect_int(v, "abs argument");
  if (i == INT64_MIN) raise("integer overflow");
  return Value::integer(i < 0 ? -i : i);
}

// Python's round(x, n): the exact binary value rounded half to even, which printf also does.
Value f_round(const Value& v, CallArgs& args, Context&) {
  args.expect("round", 2, {"precision", "method"});
  const int64_t precision = expect_int(args.get(0, "precision", Value::integer(0)), "round precision");
  const std::string method = to_str(args.get(1, "method", Value::string("common")));
  if (!v.is_number()) raise(fmt::format("round: expected a number, not {}", v.type_name()));
  if (precision < -300 || precision > 300) raise("round precision out of range");
  if (method == "common") {
    if (!v.is_float()) return Value::integer(v.as_int());
    const double x = v.as_double();
    if (!std::isfinite(x)) return v;
    if (precision >= 0) return Value::number(std::strtod(fmt::format("{:.{}f}", x, precision).c_str(), nullptr));
    const double scale = std::pow(10.0, static_cast<double>(-precision));
    return Value::number(std::nearbyint(x / scale) * scale);
  }
  if (method != "ceil" && method != "floor") raise("round method must be 'common', 'ceil' or 'floor'");
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_double() * scale;
  return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

// Sort/unique/min/max keys: strings compare case-insensitively unless case_sensitive.
Value comparable(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value::string(text::lower(v.as_string())) : v;
}

Value f_sort(const Value& v, CallArgs& args, Context& ctx) {
  args.expect("sort", 3, {"reverse", "case_sensitive", "attribute"});
  const bool reverse = args.get(0, "reverse").truthy();
  const bool case_sensitive = args.get(1, "case_sensitive").truthy();
  std::vector<Value> items = iterate(v);
  const std::vector<Value> keys = attribute_values(items, args.get(2, "attribute"));
  std::vector<std::pair<Value, size_t>> keyed;
  for (size_t i = 0; i < items.size(); ++i) keyed.emplace_back(comparable(keys[i], case_sensitive), i);
  ctx.step(items.size() * 8);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return reverse ? less(b.first, a.first) : less(a.first, b.first);
  });
  std::vector<Value> out;
  for (const auto& k : keyed) out.push_back(items[k.second]);
  return Value::list(std::move(out));
}

Value f_dictsort(const Value& v, CallArgs& args, Context& ctx) {
  args.expect("dictsort", 3, {"case_sensitive", "by", "reverse"});
  const bool case_sensitive = args.get(0, "case_sensitive").truthy();
  const std::string by = to_str(args.get(1, "by", Value::string("key")));
  const bool reverse = args.get(2, "reverse").truthy();
  if (by != "key" && by != "value") raise("dictsort: 'by' must be 'key' or 'value'");
  CallArgs none;
  std::vector<Value> pairs = f_items(v, none, ctx).items();
  const size_t pos = by == "key" ? 0 : 1;
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
    const Value x = comparable(a.items()[pos], case_sensitive), y = comparable(b.items()[pos], case_sensitive);
    return reverse ? less(y, x) : less(x, y);
  });
  return Value::list(std::move(pairs));
}

Value f_unique(const Value& v, CallArgs& args, Context& ctx) {
  args.expect("unique", 2, {"case_sensitive", "attribute"});
  const bool case_sensitive = args.get(0, "case_sensitive").truthy();
  const std::vector<Value> items = iterate(v);
  const std::vector<Value> keys = attribute_values(items, args.get(1, "attribute"));
  std::vector<Value> out, seen;
  for (size_t i = 0; i < items.size(); ++i) {
    const Value key = comparable(keys[i], case_sensitive);
    ctx.step(seen.size());
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) continue;
    seen.push_back(key);
    out.push_back(items[i]);
  }
  return Value::list(std::move(out));
}

Value min_max(const Value& v, CallArgs& args, bool want_max) {
  args.expect(want_max ? "max" : "min", 2, {"case_sensitive", "attribute"});
  const bool case_sensitive = args.get(0, "case_sensitive").truthy();
  const std::vector<Value> items = iterate(v);
  const std::vector<Value> keys = attribute_values(items, args.get(1, "attribute"));
  if (items.empty()) return Value::undefined(want_max ? "max of an empty sequence" : "min of an empty sequence");
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    const Value a = comparable(keys[i], case_sensitive), b = comparable(keys[best], case_sensitive);
    if (want_max ? less(b, a) : less(a, b)) best = i;
  }
  return items[best];
}
Value f_max(const Value& v, CallArgs& args, Context&) { return min_max(v, args, true); }
Value f_min(const Value& v, CallArgs& args, Context&) { return min_max(v, args, false); }

Value f_sum(const Value& v, CallArgs& args, Context& ctx) {
  args.expect("sum", 2, {"attribute", "start"});
  Value total = args.get(1, "start", Value::integer(0));
  for (const Value& item : attribute_values(iterate(v), args.get(0, "attribute"))) {
    if (total.is_number() && item.is_number() && !total.is_float() && !item.is_float()) {
      int64_t r;
      if (__builtin_add_overflow(total.as_int(), item.as_int(), &r)) raise("integer overflow");
      total = Value::integer(r);
    } else if (total.is_number() && item.is_number()) {
      total = Value::number(total.as_double() + item.as_double());
    } else {
      raise(fmt::format("sum: cannot add {} to {}", item.type_name(), total.type_name()));
    }
  }
  return total;
}

Value f_reverse(const Value& v, CallArgs& args, Context&) {
  args.expect("reverse", 0);
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  if (!v.is_string()) return Value::list(std::move(items));
  std::string out;
  for (const Value& c : items) out += c.as_string();
  return Value::string(std::move(out));
}

// select/reject(test, args...) and selectattr/rejectattr(attr, test, args...); no test: truthiness.
Value filter_by_test(const Value& v, CallArgs& args, Context& ctx, bool by_attribute, bool keep_matching) {
  const char* name =
      by_attribute ? (keep_matching ? "selectattr" : "rejectattr") : (keep_matching ? "select" : "reject");
  if (!args.keyword.empty()) raise(fmt::format("{}() takes no keyword arguments", name));
  size_t next = 0;
  std::string attribute;
  if (by_attribute) {
    if (args.positional.empty()) raise(fmt::format("{}() needs an attribute name", name));
    attribute = to_str(args.positional[next++]);
  }
  TestFn test = nullptr;
  if (next < args.positional.size()) {
    const std::string test_name = expect_string(args.positional[next++], "test name");
    test = find_test(test_name);
    if (!test) raise(fmt::format("no test named '{}'", test_name));
  }
  CallArgs test_args;
  test_args.positional.assign(args.positional.begin() + static_cast<long>(next), args.positional.end());
  std::vector<Value> out;
  for (const Value& item : iterate(v)) {
    ctx.step();
    const Value subject = by_attribute ? attribute_path(item, attribute) : item;
    CallArgs call = test_args;
    const bool pass = test ? test(subject, call, ctx) : subject.truthy();
    if (pass == keep_matching) out.push_back(item);
  }
  return Value::list(std::move(out));
}
Value f_select(const Value& v, CallArgs& a, Context& c) { return filter_by_test(v, a, c, false, true); }
Value f_reject(const Value& v, CallArgs& a, Context& c) { return filter_by_test(v, a, c, false, false); }
Value f_selectattr(const Value& v, CallArgs& a, Context& c) { return filter_by_test(v, a, c, true, true); }
Value f_rejectattr(const Value& v, CallArgs& a, Context& c) { return filter_by_test(v, a, c, true, false); }

// map(attribute='x'[, default=...]) or map('filter', args...).
Value f_map(const Value& v, CallArgs& args, Context& ctx) {
  std::vector<Value> out;
  const Value attribute = args.get(SIZE_MAX, "attribute");
  if (!attribute.is_undefined()) {
    args.expect("map", 0, {"attribute", "default"});
    const Value fallback = args.get(SIZE_MAX, "default");
    for (const Value& item : iterate(v)) {
      Value x = attribute_path(item, to_str(attribute));
      out.push_back(x.is_undefined() && !fallback.is_undefined() ? fallback : x);
    }
    return Value::list(std::move(out));
  }
  if (args.positional.empty()) raise("map() needs a filter name or attribute=");
  const std::string filter_name = expect_string(args.positional[0], "map filter name");
  const FilterFn filter = find_filter(filter_name);
  if (!filter) raise(fmt::format("no filter named '{}'", filter_name));
  CallArgs filter_args;
  filter_args.positional.assign(args.positional.begin() + 1, args.positional.end());
  filter_args.keyword = args.keyword;
  for (const Value& item : iterate(v)) {
    ctx.step();
    CallArgs call = filter_args;
    out.push_back(filter(item, call, ctx));
  }
  return Value::list(std::move(out));
}

// Python getattr only: a dict's keys are items, not attributes (Jinja2's attr filter).
Value f_attr(const Value& v, CallArgs& args, Context&) {
  args.expect("attr", 1);
  const std::string& name = expect_string(args.get(0, "name"), "attr name");
  if (v.is_namespace()) return get_attribute(v, name);
  Value method = find_method(v, name);
  return method.is_undefined() ? Value::undefined(fmt::format("'{} object' has no attribute '{}'", v.type_name(), name))
                               : method;
}

Value f_format(const Value& v, CallArgs& args, Context& ctx) {
  if (!args.keyword.empty()) raise("format filter: keyword arguments are not supported");
  return str_value(percent_format(to_str(v), args.positional), ctx);
}

// Jinja2's indent: every line but the first (and blank lines unless blank=True) gets `width`.
Value f_indent(const Value& v, CallArgs& args, Context& ctx) {
  args.expect("indent", 3, {"width", "first", "blank"});
  const Value w = args.get(0, "width", Value::integer(4));
  const std::string pad =
      w.is_string() ? w.as_string()
                    : std::string(static_cast<size_t>(std::clamp<int64_t>(expect_int(w, "indent width"), 0, 256)), ' ');
  const bool first = args.get(1, "first").truthy(), blank = args.get(2, "blank").truthy();
  const std::vector<std::string> lines = text::splitlines(expect_string(v, "indent filter input") + "\n", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += '\n';
    if (i > 0 && (blank || !lines[i].empty())) out += pad;
    out += lines[i];
  }
  if (first) out = pad + out;
  return str_value(std::move(out), ctx);
}

Value f_center(const Value& v, CallArgs& args, Context& ctx) {
  args.expect("center", 1, {"width"});
  const std::string s = to_str(v);
  const int64_t width =
      std::min<int64_t>(expect_int(args.get(0, "width", Value::integer(80)), "center width"), 1 << 20);
  const int64_t n = text::char_count(s);
  if (width <= n) return Value::string(s);
  // CPython: left = pad/2 + (pad & width & 1)
  const int64_t pad = width - n, left = pad / 2 + (pad & width & 1);
  return str_value(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(pad - left), ' '),
                   ctx);
}

Value f_wordcount(const Value& v, CallArgs& args, Context&) {
  args.expect("wordcount", 0);
  return Value::integer(static_cast<int64_t>(text::split(to_str(v), nullptr, -1, false).size()));
}

struct Entry {
  std::string_view name;
  FilterFn fn;
};

constexpr Entry kFilters[] = {
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"length", f_length},
    {"count", f_length},
    {"upper", f_upper},
    {"lower", f_lower},
    {"capitalize", f_capitalize},
    {"title", f_title},
    {"replace", f_replace},
    {"join", f_join},
    {"default", f_default},
    {"d", f_default},
    {"first", f_first},
    {"last", f_last},
    {"items", f_items},
    {"list", f_list},
    {"string", f_string},
    {"safe", f_safe},
    {"escape", f_escape},
    {"e", f_escape},
    {"int", f_int},
    {"float", f_float},
    {"abs", f_abs},
    {"round", f_round},
    {"sort", f_sort},
    {"dictsort", f_dictsort},
    {"unique", f_unique},
    {"max", f_max},
    {"min", f_min},
    {"sum", f_sum},
    {"reverse", f_reverse},
    {"select", f_select},
    {"reject", f_reject},
    {"selectattr", f_selectattr},
    {"rejectattr", f_rejectattr},
    {"map", f_map},
    {"attr", f_attr},
    {"format", f_format},
    {"indent", f_indent},
    {"center", f_center},
    {"wordcount", f_wordcount},
};

}  // namespace

FilterFn find_filter(std::string_view name) {
  for (const Entry& e : kFilters)
    if (e.name == name) return e.fn;
  return nullptr;
}

}  // namespace kvslim::jinja
