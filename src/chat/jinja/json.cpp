#include "chat/jinja/json.h"

#include <fmt/format.h>

#include <cmath>

#include "chat/jinja/access.h"

namespace kvslim::jinja {

namespace {

void append_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20)
          out += fmt::format("\\u{:04x}", c);
        else
          out += static_cast<char>(c);  // ensure_ascii=False: UTF-8 passes through (DEL too)
    }
  }
  out += '"';
}

void newline(std::string& out, int indent, int level) {
  out += '\n';
  out.append(static_cast<size_t>(indent * level), ' ');
}

void append(std::string& out, const Value& v, int indent, int level) {
  if (level > 128) raise("tojson: value nested too deeply");
  using K = Value::Kind;
  switch (v.kind()) {
    case K::None: out += "null"; return;
    case K::Bool: out += v.as_bool() ? "true" : "false"; return;
    case K::Int: out += std::to_string(v.as_int()); return;
    case K::Float: {
      const double f = v.as_double();
      if (std::isnan(f)) out += "NaN";
      else if (std::isinf(f)) out += f > 0 ? "Infinity" : "-Infinity";
      else out += format_float(f);
      return;
    }
    case K::String: append_string(out, v.as_string()); return;
    case K::List: {
      const auto& items = v.items();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(out, indent, level + 1);
        append(out, items[i], indent, level + 1);
      }
      if (indent >= 0) newline(out, indent, level);
      out += ']';
      return;
    }
    case K::Dict:
    case K::Namespace: {
      if (v.is_namespace()) raise("Object of type Namespace is not JSON serializable");
      const auto& entries = v.dict_data().entries;
      if (entries.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(out, indent, level + 1);
        append_string(out, entries[i].first);
        out += ": ";
        append(out, entries[i].second, indent, level + 1);
      }
      if (indent >= 0) newline(out, indent, level);
      out += '}';
      return;
    }
    case K::Undefined: undefined_error(v, "tojson");
    case K::Callable: raise("Object of type function is not JSON serializable");
  }
}

}  // namespace

std::string to_json(const Value& v, int indent) {
  std::string out;
  append(out, v, indent, 0);
  return out;
}

}  // namespace kvslim::jinja
