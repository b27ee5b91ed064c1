// The values a template computes with, with Python's semantics where chat templates depend on
// them: truthiness, ==, ordering, str() (None prints "None", 1.0 prints "1.0"), dicts keep
// insertion order. Strings, lists and dicts are shared (copying a Value is cheap); templates run
// in an immutable sandbox, so only namespaces are ever modified after creation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kvslim::jinja {

// A template error without position; the evaluator adds the line of the innermost expression
// or statement it passes through (line 0: not yet known).
struct TemplateError : std::runtime_error {
  explicit TemplateError(const std::string& message, int line = 0) : std::runtime_error(message), line(line) {}
  int line;
};

[[noreturn]] void raise(const std::string& message);

class Value;
class Context;
struct CallArgs;

struct ListData {
  std::vector<Value> items;
  bool tuple = false;  // prints as (a, b)
};

// String keys only: JSON objects and the dicts chat templates build have no others. Small
// dicts (messages, loop) are searched linearly; the hash index exists only past that size.
struct DictData {
  static constexpr size_t kLinearEntries = 12;
  std::vector<std::pair<std::string, Value>> entries;
  std::unordered_map<std::string, size_t> index;  // empty while entries.size() <= kLinearEntries
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value value);
};

struct Callable {
  std::string name;
  std::function<Value(CallArgs&, Context&)> fn;
};

class Value {
 public:
  enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };

  Value() = default;  // undefined
  static Value undefined(std::string hint = {});
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double f);
  static Value string(std::string s);
  static Value list(std::vector<Value> items, bool tuple = false);
  static Value dict(std::shared_ptr<DictData> d = nullptr);
  static Value namespace_(std::shared_ptr<DictData> d = nullptr);
  static Value callable(std::string name, std::function<Value(CallArgs&, Context&)> fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_namespace() const { return kind_ == Kind::Namespace; }
  bool is_callable() const { return kind_ == Kind::Callable; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::Bool ? (b_ ? 1 : 0) : i_; }
  double as_double() const;  // any number
  const std::string& as_string() const { return *s_; }
  const std::vector<Value>& items() const { return l_->items; }
  bool is_tuple() const { return l_->tuple; }
  const DictData& dict_data() const { return *d_; }
  DictData& namespace_data() const { return *d_; }  // namespaces are the one mutable kind
  const Callable& callable_data() const { return *c_; }
  const std::string& undefined_hint() const;

  bool truthy() const;
  // Python's type name, for error messages ("str", "dict", "NoneType", ...).
  const char* type_name() const;

 private:
  Kind kind_ = Kind::Undefined;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const std::string> s_;  // String, and Undefined's hint
  std::shared_ptr<ListData> l_;
  std::shared_ptr<DictData> d_;
  std::shared_ptr<const Callable> c_;
  friend bool same_object(const Value&, const Value&);
};

// Python `==` (1 == 1.0 == True; lists and dicts element-wise; undefined equals only undefined).
bool equals(const Value& a, const Value& b);
// Python `<` for numbers, strings (by code point, i.e. UTF-8 bytes) and lists; raises otherwise.
bool less(const Value& a, const Value& b);
// Python `is` as far as it is observable here.
bool same_object(const Value& a, const Value& b);
// Python `in`: substring, list element, dict key.
bool contains(const Value& container, const Value& item);

// str(): what `{{ x }}` prints (undefined prints nothing, None prints "None").
std::string to_str(const Value& v);
// repr(): strings quoted as Python does, used inside printed lists and dicts.
std::string to_repr(const Value& v);
// Python's repr of a float ("1.0", "0.1", "1e+16", "inf").
std::string format_float(double f);

// The elements `for` and list() see: list items, dict keys, string characters; undefined is
// empty; anything else raises.
std::vector<Value> iterate(const Value& v);
// len(): code points of a string, items of a list or dict; raises for others.
int64_t length(const Value& v);

}  // namespace kvslim::jinja
