#include "cli/prompt_input.h"

#include <fstream>
#include <sstream>

#include "util/error.h"

namespace kvslim::cli {

void PromptInput::add_options(CLI::App& command) {
  auto* p = command.add_option("-p,--prompt", text, "prompt text");
  auto* f = command.add_option("-f,--file", file, "read the prompt from FILE (byte-exact)");
  p->excludes(f);
}

std::string PromptInput::read() const {
  if (file.empty()) {
    if (text.empty()) fail("give a prompt with -p TEXT or -f FILE");
    return text;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) fail("cannot read prompt file '{}'", file);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace kvslim::cli
