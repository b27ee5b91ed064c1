// libFuzzer target for the chat-template interpreter (optional CMake target
// kvslim_fuzz_chat_template, -DKVSLIM_FUZZ=ON with clang). Templates arrive inside downloaded
// GGUF files, so they are untrusted input; the input is a template and a conversation
// (chat_template_input.h says how they are split).
//
// Bad input must end in kvslim::Error (a syntax error, a runtime error, raise_exception, a limit
// on work or output): any other exception, a crash, a hang or a sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "chat_template_input.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)kvslim::fuzz::render_fuzz_input(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const kvslim::Error&) {
    // the clear, one-line refusal every bad template or conversation must end in
  }
  return 0;
}
