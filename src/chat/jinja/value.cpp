#include "chat/jinja/value.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "chat/jinja/text.h"

namespace kvslim::jinja {

void raise(const std::string& message) { throw TemplateError(message); }

const Value* DictData::find(const std::string& key) const {
  if (index.empty()) {
    for (const auto& entry : entries)
      if (entry.first == key) return &entry.second;
    return nullptr;
  }
  const auto it = index.find(key);
  return it == index.end() ? nullptr : &entries[it->second].second;
}

void DictData::set(const std::string& key, Value value) {
  if (Value* existing = const_cast<Value*>(find(key))) {
    *existing = std::move(value);
    return;
  }
  entries.emplace_back(key, std::move(value));
  if (!index.empty()) {
    index.emplace(key, entries.size() - 1);
  } else if (entries.size() > kLinearEntries) {
    for (size_t i = 0; i < entries.size(); ++i) index.emplace(entries[i].first, i);
  }
}

Value Value::undefined(std::string hint) {
  Value v;
  if (!hint.empty()) v.s_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.b_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.i_ = i;
  return v;
}

Value Value::number(double f) {
  Value v;
  v.kind_ = Kind::Float;
  v.f_ = f;
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::String;
  v.s_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::list(std::vector<Value> items, bool tuple) {
  Value v;
  v.kind_ = Kind::List;
  v.l_ = std::make_shared<ListData>();
  v.l_->items = std::move(items);
  v.l_->tuple = tuple;
  return v;
}

Value Value::dict(std::shared_ptr<DictData> d) {
  Value v;
  v.kind_ = Kind::Dict;
  v.d_ = d ? std::move(d) : std::make_shared<DictData>();
  return v;
}

Value Value::namespace_(std::shared_ptr<DictData> d) {
  Value v = dict(std::move(d));
  v.kind_ = Kind::Namespace;
  return v;
}

Value Value::callable(std::string name, std::function<Value(CallArgs&, Context&)> fn) {
  Value v;
  v.kind_ = Kind::Callable;
  v.c_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

double Value::as_double() const {
  switch (kind_) {
    case Kind::Float: return f_;
    case Kind::Int: return static_cast<double>(i_);
    case Kind::Bool: return b_ ? 1.0 : 0.0;
    default: raise(fmt::format("expected a number, got {}", type_name()));
  }
}

const std::string& Value::undefined_hint() const {
  static const std::string empty;
  return kind_ == Kind::Undefined && s_ ? *s_ : empty;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return b_;
    case Kind::Int: return i_ != 0;
    case Kind::Float: return f_ != 0.0;
    case Kind::String: return !s_->empty();
    case Kind::List: return !l_->items.empty();
    case Kind::Dict: return !d_->entries.empty();
    case Kind::Namespace:
    case Kind::Callable: return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return l_->tuple ? "tuple" : "list";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Callable: return "function";
  }
  return "?";
}

bool same_object(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::Undefined:
    case K::None: return true;
    case K::Bool: return a.b_ == b.b_;
    case K::Int: return a.i_ == b.i_;
    case K::Float: return a.f_ == b.f_;
    case K::String: return a.s_ == b.s_ || *a.s_ == *b.s_;
    case K::List: return a.l_ == b.l_;
    case K::Dict:
    case K::Namespace: return a.d_ == b.d_;
    case K::Callable: return a.c_ == b.c_;
  }
  return false;
}

bool equals(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::Undefined:
    case K::None: return true;
    case K::String: return a.as_string() == b.as_string();
    case K::List: {
      const auto &x = a.items(), &y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equals(x[i], y[i])) return false;
      return true;
    }
    case K::Dict: {
      const auto &x = a.dict_data(), &y = b.dict_data();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [key, value] : x.entries) {
        const Value* other = y.find(key);
        if (!other || !equals(value, *other)) return false;
      }
      return true;
    }
    default: return same_object(a, b);
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 byte order = code point order
  if (a.is_list() && b.is_list()) {
    const auto &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  raise(fmt::format("'<' not supported between instances of '{}' and '{}'", a.type_name(), b.type_name()));
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string())
      raise(fmt::format("'in <string>' requires string as left operand, not {}", item.type_name()));
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_list()) {
    for (const Value& v : container.items())
      if (equals(v, item)) return true;
    return false;
  }
  if (container.is_dict()) return item.is_string() && container.dict_data().find(item.as_string()) != nullptr;
  if (container.is_undefined()) return false;
  raise(fmt::format("argument of type '{}' is not iterable", container.type_name()));
}

std::string format_float(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  // Shortest round-trip digits, then Python's layout: fixed for 1e-4 <= |f| < 1e16, else exponent.
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  std::string sci(buf, result.ptr);
  const size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  const int exponent = std::stoi(sci.substr(e + 1));
  std::string sign;
  if (mantissa[0] == '-') sign = "-", mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  if (exponent >= -4 && exponent < 16) {
    std::string out;
    if (exponent < 0) {
      out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
      out = digits + std::string(static_cast<size_t>(exponent) + 1 - digits.size(), '0') + ".0";
    } else {
      out =
          digits.substr(0, static_cast<size_t>(exponent) + 1) + "." + digits.substr(static_cast<size_t>(exponent) + 1);
    }
    return sign + out;
  }
  std::string out = digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  return sign + out + fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
}

namespace {

std::string repr_string(const std::string& s) {
  // Python picks single quotes unless the text has one and no double quote.
  const bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == static_cast<unsigned char>(quote) || c == '\\')
      out += '\\', out += static_cast<char>(c);
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7F)
      out += fmt::format("\\x{:02x}", c);
    else
      out += static_cast<char>(c);
  }
  out += quote;
  return out;
}

void append_str(std::string& out, const Value& v, bool repr, int depth) {
  using K = Value::Kind;
  if (depth > 64) raise("value nested too deeply to print");
  switch (v.kind()) {
    case K::Undefined: return;
    case K::None: out += "None"; return;
    case K::Bool: out += v.as_bool() ? "True" : "False"; return;
    case K::Int: out += std::to_string(v.as_int()); return;
    case K::Float: out += format_float(v.as_double()); return;
    case K::String: out += repr ? repr_string(v.as_string()) : v.as_string(); return;
    case K::List: {
      out += v.is_tuple() ? '(' : '[';
      const auto& items = v.items();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        append_str(out, items[i], true, depth + 1);
      }
      if (v.is_tuple() && items.size() == 1) out += ',';
      out += v.is_tuple() ? ')' : ']';
      return;
    }
    case K::Dict:
    case K::Namespace: {
      out += v.is_namespace() ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [key, value] : v.dict_data().entries) {
        if (!first) out += ", ";
        first = false;
        out += repr_string(key);
        out += ": ";
        append_str(out, value, true, depth + 1);
      }
      out += v.is_namespace() ? "}>" : "}";
      return;
    }
    case K::Callable: out += "<function " + v.callable_data().name + ">"; return;
  }
}

}  // namespace

std::string to_str(const Value& v) {
  if (v.is_string()) return v.as_string();
  std::string out;
  append_str(out, v, false, 0);
  return out;
}

std::string to_repr(const Value& v) {
  std::string out;
  append_str(out, v, true, 0);
  return out;
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::List: return v.items();
    case Value::Kind::Dict: {
      std::vector<Value> keys;
      keys.reserve(v.dict_data().entries.size());
      for (const auto& entry : v.dict_data().entries) keys.push_back(Value::string(entry.first));
      return keys;
    }
    case Value::Kind::String: {
      const std::string& s = v.as_string();
      const std::vector<size_t> offsets = text::char_offsets(s);
      std::vector<Value> chars;
      chars.reserve(offsets.size() - 1);
      for (size_t i = 0; i + 1 < offsets.size(); ++i)
        chars.push_back(Value::string(s.substr(offsets[i], offsets[i + 1] - offsets[i])));
      return chars;
    }
    case Value::Kind::Undefined: return {};
    default: raise(fmt::format("'{}' object is not iterable", v.type_name()));
  }
}

int64_t length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::String: return text::char_count(v.as_string());
    case Value::Kind::List: return static_cast<int64_t>(v.items().size());
    case Value::Kind::Dict:
    case Value::Kind::Namespace: return static_cast<int64_t>(v.dict_data().entries.size());
    case Value::Kind::Undefined: return 0;
    default: raise(fmt::format("object of type '{}' has no len()", v.type_name()));
  }
}

}  // namespace kvslim::jinja
