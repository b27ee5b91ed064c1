// Errors that cross a layer boundary: one exception type carrying a message that names the
// file, tensor or field at fault. The CLI catches it and prints one line; nothing else does.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace kvslim {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace kvslim
