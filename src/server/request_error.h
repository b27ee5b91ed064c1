// An HTTP request the server refuses: the status, the body field at fault (OpenAI's `param`) and
// a one-line message. Handlers throw it; the router turns it into an OpenAI-shaped JSON error.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace kvslim::server {

struct RequestError : std::runtime_error {
  RequestError(int status, std::string param, const std::string& message)
      : std::runtime_error(message), status(status), param(std::move(param)) {}
  int status;
  std::string param;  // empty when no single field is at fault
};

// 400 naming `param`.
template <class... Args>
[[noreturn]] void bad_field(const std::string& param, fmt::format_string<Args...> format, Args&&... args) {
  throw RequestError(400, param, fmt::format(format, std::forward<Args>(args)...));
}

// OpenAI's error `type` for a status.
inline const char* error_type(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 409: return "conflict_error";
    case 413: return "invalid_request_error";
    case 501: return "not_supported_error";
    case 503: return "unavailable_error";
    default: return "server_error";
  }
}

}  // namespace kvslim::server
