#include "cli/prompt_input.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "util/error.h"

namespace kvslim::cli {

void PromptInput::add_options(CLI::App& command) {
  auto* p = command.add_option("-p,--prompt", text, "prompt text");
  auto* f = command.add_option("-f,--file", file, "read the prompt from FILE (byte-exact; - for stdin)");
  p->excludes(f);
}

std::string PromptInput::read() const {
  if (file.empty()) {
    if (text.empty()) fail("give a prompt with -p TEXT or -f FILE");
    return text;
  }
  return read_bytes(file, "prompt file");
}

std::string read_bytes(const std::string& path, const char* what) {
  std::ostringstream bytes;
  if (path == "-") {
    bytes << std::cin.rdbuf();
    return bytes.str();
  }
  if (std::filesystem::is_directory(path)) fail("cannot read {} '{}': it is a directory", what, path);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read {} '{}'", what, path);
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace kvslim::cli
