#include "chat/jinja/access.h"

#include <fmt/format.h>

#include <optional>

#include "chat/jinja/builtins.h"
#include "chat/jinja/text.h"

namespace kvslim::jinja {

void undefined_error(const Value& undefined, const std::string& doing) {
  const std::string& hint = undefined.undefined_hint();
  raise(fmt::format("{} ({})", hint.empty() ? "undefined value" : hint, doing));
}

namespace {

std::string object_name(const Value& v) { return fmt::format("'{} object'", v.type_name()); }

}  // namespace

Value get_attribute(const Value& object, const std::string& name) {
  if (object.is_undefined()) undefined_error(object, fmt::format("reading attribute '{}'", name));
  if (object.is_namespace()) {
    const Value* v = object.dict_data().find(name);
    return v ? *v : Value::undefined(fmt::format("namespace has no attribute '{}'", name));
  }
  Value method = find_method(object, name);
  if (!method.is_undefined()) return method;
  if (object.is_dict()) {
    const Value* v = object.dict_data().find(name);
    if (v) return *v;
  }
  return Value::undefined(fmt::format("{} has no attribute '{}'", object_name(object), name));
}

Value get_item(const Value& object, const Value& index) {
  if (object.is_undefined()) undefined_error(object, fmt::format("reading item {}", to_repr(index)));
  if ((object.is_dict() || object.is_namespace()) && index.is_string()) {
    const Value* v = object.dict_data().find(index.as_string());
    if (v) return *v;
  }
  if ((object.is_list() || object.is_string()) && (index.is_int() || index.is_bool())) {
    const int64_t n = length(object);
    int64_t i = index.as_int();
    if (i < 0) i += n;
    if (i >= 0 && i < n) {
      if (object.is_list()) return object.items()[static_cast<size_t>(i)];
      const std::string& s = object.as_string();
      if (text::is_ascii(s)) return Value::string(s.substr(static_cast<size_t>(i), 1));
      const auto offsets = text::char_offsets(s);
      return Value::string(s.substr(offsets[static_cast<size_t>(i)],
                                    offsets[static_cast<size_t>(i) + 1] - offsets[static_cast<size_t>(i)]));
    }
    return Value::undefined(fmt::format("{} has no element {}", object_name(object), index.as_int()));
  }
  if (index.is_string() && !object.is_namespace()) {
    Value method = find_method(object, index.as_string());
    if (!method.is_undefined()) return method;
  }
  return Value::undefined(fmt::format("{} has no element {}", object_name(object), to_repr(index)));
}

Value slice(const Value& object, const Value* start, const Value* stop, const Value* step) {
  if (object.is_undefined()) undefined_error(object, "slicing");
  // Jinja2 compiles a slice to a plain Python subscript, so slicing a number is an error.
  if (!object.is_list() && !object.is_string())
    raise(fmt::format("'{}' object is not subscriptable", object.type_name()));
  auto bound = [](const Value* v, const char* what) -> std::optional<int64_t> {
    if (!v || v->is_none()) return std::nullopt;
    if (!v->is_int() && !v->is_bool()) raise(fmt::format("slice {} must be an integer or None", what));
    return v->as_int();
  };
  const int64_t n = length(object);
  const int64_t st = bound(step, "step").value_or(1);
  if (st == 0) raise("slice step cannot be zero");
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t i = *v;
    if (i < 0) {
      i += n;
      if (i < 0) i = st < 0 ? -1 : 0;
    } else if (i >= n) {
      i = st < 0 ? n - 1 : n;
    }
    return i;
  };
  const int64_t from = adjust(bound(start, "start"), st < 0 ? n - 1 : 0);
  const int64_t to = adjust(bound(stop, "stop"), st < 0 ? -1 : n);
  std::vector<int64_t> picked;
  if (st > 0)
    for (int64_t i = from; i < to; i += st) picked.push_back(i);
  else
    for (int64_t i = from; i > to; i += st) picked.push_back(i);
  if (object.is_list()) {
    std::vector<Value> items;
    items.reserve(picked.size());
    for (int64_t i : picked) items.push_back(object.items()[static_cast<size_t>(i)]);
    return Value::list(std::move(items), object.is_tuple());
  }
  const std::string& s = object.as_string();
  std::string out;
  if (text::is_ascii(s)) {
    for (int64_t i : picked) out += s[static_cast<size_t>(i)];
  } else {
    const auto offsets = text::char_offsets(s);
    for (int64_t i : picked)
      out.append(s, offsets[static_cast<size_t>(i)],
                 offsets[static_cast<size_t>(i) + 1] - offsets[static_cast<size_t>(i)]);
  }
  return Value::string(std::move(out));
}

}  // namespace kvslim::jinja
