// The prompt options shared by subcommands: -p TEXT or -f FILE (read byte-exact).
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

}  // namespace kvslim::cli
