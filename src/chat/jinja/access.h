// Reading parts of values the way Jinja2's sandbox does: `a.b` looks for a method first and an
// item second, `a[b]` the other way round; a missing key or index gives undefined (an error
// only once something is done with it), but any access on undefined is an error.
#pragma once

#include <string>

#include "chat/jinja/value.h"

namespace kvslim::jinja {

Value get_attribute(const Value& object, const std::string& name);
Value get_item(const Value& object, const Value& index);
// Python's object[start:stop:step] on lists (and tuples) and strings; null bounds are omitted.
Value slice(const Value& object, const Value* start, const Value* stop, const Value* step);

// The error for doing anything but printing or testing with an undefined value.
[[noreturn]] void undefined_error(const Value& undefined, const std::string& doing);

}  // namespace kvslim::jinja
