// The prompt options shared by subcommands: -p TEXT or -f FILE (read byte-exact, - for stdin).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace kvslim::cli {

struct PromptInput {
  std::string text;
  std::string file;

  void add_options(CLI::App& command);
  // The prompt's bytes; throws kvslim::Error when neither/both are given or FILE is unreadable.
  std::string read() const;
};

// The bytes of `path`, or of standard input when it is "-"; throws kvslim::Error naming `what`
// and the path when it cannot be read.
std::string read_bytes(const std::string& path, const char* what);

}  // namespace kvslim::cli
