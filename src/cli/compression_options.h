// --press, --budget, --ratio and --press-opt, shared by generate, inspect and bench.
#pragma once

#include <CLI/CLI.hpp>

#include "engine/session.h"

namespace kvslim::cli {

inline void add_compression_options(CLI::App& command, CompressionOptions& options) {
  command.add_option("--press", options.press, "compression method (see `kvslim presses`)")->capture_default_str();
  auto* budget = command.add_option("--budget", options.budget, "prompt tokens kept per layer and KV head");
  auto* ratio = command.add_option("--ratio", options.ratio, "fraction of the prompt evicted, in [0, 1)");
  budget->excludes(ratio);
  command.add_option("--press-opt", options.press_options, "method option key=value (repeatable)");
}

}  // namespace kvslim::cli
