// What templates call by name: filters (`x | trim`), tests (`x is defined`), methods of strings
// and dicts (`s.startswith('a')`, `d.items()`), and the globals of the Hugging Face environment
// (range, dict, namespace, raise_exception, strftime_now).
#pragma once

#include <string>
#include <string_view>

#include "chat/jinja/ast.h"

namespace kvslim::jinja {

FilterFn find_filter(std::string_view name);  // nullptr when unknown
TestFn find_test(std::string_view name);      // nullptr when unknown

// The method `name` of `object` bound to it, or undefined when the type has no such method.
Value find_method(const Value& object, const std::string& name);

// Defines the globals in `frame`.
void add_globals(Context::Frame& frame);

// Calls a callable value (function, method, macro); raises for anything else.
Value call_value(const Value& callee, CallArgs& args, Context& ctx);

// Argument checks shared by filters, tests, methods and globals; they raise naming `what`.
const std::string& expect_string(const Value& v, const char* what);
int64_t expect_int(const Value& v, const char* what);

// The value at a dotted attribute path ("a.b", "items.0") of `v`, items first as Jinja2's
// attribute filters do; undefined when missing.
Value attribute_path(const Value& v, const std::string& path);

// Python's printf-style `fmt % args` (the `format` filter and the % operator on strings).
std::string percent_format(const std::string& fmt, const std::vector<Value>& args);

}  // namespace kvslim::jinja
