// libFuzzer target for the server's request parser (optional CMake target kvslim_fuzz_request,
// -DKVSLIM_FUZZ=ON with clang). The first byte picks chat or text completions, the rest is the
// body. The parser must either return a request within the limits or throw RequestError 400:
// any other exception, a crash or a sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/request_error.h"
#include "server/request_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool chat = data[0] & 1;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const kvslim::server::RequestLimits limits;
  try {
    const auto r = kvslim::server::parse_completion_request(body, chat, limits);
    if (r.max_tokens < 0 || r.max_tokens > limits.max_tokens) __builtin_trap();
    if (r.stop.size() > limits.max_stop || r.top_logprobs > limits.max_top_logprobs) __builtin_trap();
    if (chat && (!r.messages.is_array() || r.messages.empty())) __builtin_trap();
    for (const auto& m : r.messages)
      if (!m["role"].is_string() || !m["content"].is_string()) __builtin_trap();
  } catch (const kvslim::server::RequestError& e) {
    if (e.status != 400) __builtin_trap();
  }
  (void)kvslim::server::cli_flags_to_fields(body);
  return 0;
}
