// JSON in and out of templates: messages arrive as JSON, and `tojson` must print exactly what
// Python's json.dumps(x, ensure_ascii=False[, indent=n]) prints (", " and ": " separators,
// non-ASCII kept, floats as Python's repr, NaN/Infinity bare).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "chat/jinja/value.h"

namespace kvslim::jinja {

template <class Json>
Value from_json(const Json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::boolean(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::integer(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = j.template get<uint64_t>();
      return u <= static_cast<uint64_t>(INT64_MAX) ? Value::integer(static_cast<int64_t>(u))
                                                   : Value::number(static_cast<double>(u));
    }
    case nlohmann::json::value_t::number_float: return Value::number(j.template get<double>());
    case nlohmann::json::value_t::string: return Value::string(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(from_json(item));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      auto d = std::make_shared<DictData>();
      for (auto it = j.begin(); it != j.end(); ++it) d->set(it.key(), from_json(it.value()));
      return Value::dict(std::move(d));
    }
    default: raise("unsupported JSON value (binary)");
  }
}

// json.dumps's options; the defaults are the Hugging Face tojson's.
struct JsonStyle {
  int indent = -1;  // < 0: one line
  bool ensure_ascii = false;
  bool sort_keys = false;
  std::string item_separator, key_separator = ": ";  // item default: ", " on one line, "," indented
};

// Raises for values JSON cannot hold (undefined, functions, namespaces).
std::string to_json(const Value& v, const JsonStyle& style = {});

}  // namespace kvslim::jinja
