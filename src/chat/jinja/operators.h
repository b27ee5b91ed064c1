// Python's arithmetic on template values: int stays int (overflow is an error, not a wrap),
// `/` gives a float, `//` and `%` floor, `+` joins strings and lists, `*` repeats them,
// `%` formats a string, `~` joins the str() of both sides.
#pragma once

#include <string>

#include "chat/jinja/context.h"
#include "chat/jinja/value.h"

namespace kvslim::jinja {

Value arithmetic(const std::string& op, const Value& a, const Value& b, Context& ctx);
Value negate(const Value& v);
// == != < > <= >= in "not in"
bool compare(const std::string& op, const Value& a, const Value& b);

}  // namespace kvslim::jinja
