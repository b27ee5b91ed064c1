// Option groups shared by subcommands: the compression method (--press, --budget, --ratio,
// --press-opt, --prefill-evict), the KV page types (--cache-type-k, --cache-type-v) and the
// engine (--ctx, --batch, --kv-page, --threads, and the page types).
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
  command.add_option("--prefill-evict", options.prefill_evict,
                     "end: evict once the prompt is cached (the papers' setting); block: after every prefill block, "
                     "so a head never holds more than budget + --batch tokens")
      ->check(CLI::IsMember({"end", "block"}))
      ->capture_default_str();
}

// --cache-type-k / --cache-type-v (llama.cpp's names): the stored type of KV pages.
inline void add_kv_type_options(CLI::App& command, EngineOptions& options) {
  for (auto [name, type] : {std::pair{"--cache-type-k", &options.cache_type_k}, std::pair{"--cache-type-v", &options.cache_type_v}}) {
    command
        .add_option_function<std::string>(
            name, [type, name = std::string(name)](const std::string& v) { *type = kv_type_from_name(v, name); },
            std::string("stored type of the KV cache's ") + (type == &options.cache_type_k ? "keys" : "values") +
                ": f32, f16, bf16 or q8_0")
        ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0"}))
        ->default_str(dtype_name(*type));
  }
}

inline void add_engine_options(CLI::App& command, EngineOptions& options, int& threads) {
  command.add_option("--ctx", options.context, "context size in tokens (prompt + generated)")->capture_default_str();
  command.add_option("--batch", options.batch, "prefill chunk size in tokens")->capture_default_str();
  command.add_option("--kv-page", options.page_tokens, "KV page size in tokens per head")->capture_default_str();
  command.add_option("--threads", threads, "threads (0: all cores)")->capture_default_str();
  add_kv_type_options(command, options);
}

}  // namespace kvslim::cli
