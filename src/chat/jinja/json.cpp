#include "chat/jinja/json.h"

#include <fmt/format.h>

#include <cmath>

#include <algorithm>

#include "chat/jinja/access.h"
#include "util/utf8.h"

namespace kvslim::jinja {

namespace {

void append_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (ensure_ascii && c >= 0x80) {
      // \uXXXX, with a surrogate pair above the BMP, as Python writes it.
      size_t pos = i;
      uint32_t cp = decode_utf8(s, pos);
      i = pos - 1;
      if (cp >= 0x10000) {
        cp -= 0x10000;
        out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
      } else {
        out += fmt::format("\\u{:04x}", cp);
      }
      continue;
    }
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

void append(std::string& out, const Value& v, const JsonStyle& style, int level) {
  const int indent = style.indent;
  const std::string& item_sep = !style.item_separator.empty() ? style.item_separator : indent >= 0 ? "," : ", ";
  if (level > 128) raise("tojson: value nested too deeply");
  using K = Value::Kind;
  switch (v.kind()) {
    case K::None: out += "null"; return;
    case K::Bool: out += v.as_bool() ? "true" : "false"; return;
    case K::Int: out += std::to_string(v.as_int()); return;
    case K::Float: {
      const double f = v.as_double();
      if (std::isnan(f))
        out += "NaN";
      else if (std::isinf(f))
        out += f > 0 ? "Infinity" : "-Infinity";
      else
        out += format_float(f);
      return;
    }
    case K::String: append_string(out, v.as_string(), style.ensure_ascii); return;
    case K::List: {
      const auto& items = v.items();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        if (indent >= 0) newline(out, indent, level + 1);
        append(out, items[i], style, level + 1);
      }
      if (indent >= 0) newline(out, indent, level);
      out += ']';
      return;
    }
    case K::Dict:
    case K::Namespace: {
      if (v.is_namespace()) raise("Object of type Namespace is not JSON serializable");
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& entry : v.dict_data().entries) entries.push_back(&entry);
      if (style.sort_keys)
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto* a, const auto* b) { return a->first < b->first; });
      if (entries.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += item_sep;
        if (indent >= 0) newline(out, indent, level + 1);
        append_string(out, entries[i]->first, style.ensure_ascii);
        out += style.key_separator;
        append(out, entries[i]->second, style, level + 1);
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

std::string to_json(const Value& v, const JsonStyle& style) {
  std::string out;
  append(out, v, style, 0);
  return out;
}

}  // namespace kvslim::jinja
