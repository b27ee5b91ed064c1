// Option groups shared by subcommands: the compression method (--press, --budget, --ratio,
// --press-opt, --prefill-evict), the KV page types (--cache-type-k, --cache-type-v), the engine
// (--ctx, --batch, --kv-page, --threads, and the page types) and the chat template override
// (--chat-template).
#pragma once

#include <CLI/CLI.hpp>

#include "engine/session.h"
#include "util/error.h"

namespace kvslim::cli {

inline void add_compression_options(CLI::App& command, CompressionOptions& options) {
  command.add_option("--press", options.press, "compression method (see `kvslim presses`)")->capture_default_str();
  auto* budget = command.add_option("--budget", options.budget, "prompt tokens kept per layer and KV head");
  auto* ratio = command.add_option("--ratio", options.ratio, "fraction of the prompt evicted, in [0, 1)");
  budget->excludes(ratio);
  command.add_option("--press-opt", options.press_options, "method option key=value (repeatable)");
  command
      .add_option_function<std::string>(
          "--prefill-evict", [&options](const std::string& v) { options.prefill_evict = parse_prefill_evict(v); },
          "end: evict once the prompt is cached (the papers' setting); block: after every prefill block, "
          "so a head never holds more than budget + --batch tokens")
      ->default_str(std::string(to_string(options.prefill_evict)));  // a wrong word: parse_prefill_evict's error
}

// --lookahead-adapter FILE (generate, chat, serve): the adapter lookaheadkv runs with when
// --press-opt (or a server request) names none; without it, MODEL.lookahead.gguf beside the model
// when that exists. The command passes `path` to CompressionOptions::find_default_adapter.
inline void add_lookahead_adapter_option(CLI::App& command, std::string& path) {
  command.add_option("--lookahead-adapter", path,
                     "LookaheadKV adapter for --press lookaheadkv (default: MODEL.lookahead.gguf beside the model)");
}

// --load-kv takes the method, its options and the budget from the KV file: any compression option
// given as well would be ignored, so it is refused (generate and chat).
inline void refuse_compression_with_load_kv(const CompressionOptions& c, const std::string& lookahead_adapter) {
  if (c.press != "full" || c.budget || c.ratio || !c.press_options.empty() || c.prefill_evict != PrefillEvict::End ||
      !lookahead_adapter.empty())
    fail(
        "--load-kv takes the method, its options and the budget from the file: drop --press, --budget, --ratio, "
        "--press-opt, --prefill-evict and --lookahead-adapter");
}

// --cache-type-k / --cache-type-v (llama.cpp's names): the stored type of KV pages.
inline void add_kv_type_options(CLI::App& command, EngineOptions& options) {
  for (auto [name, type] :
       {std::pair{"--cache-type-k", &options.cache_type_k}, std::pair{"--cache-type-v", &options.cache_type_v}}) {
    command
        .add_option_function<std::string>(
            name, [type, name = std::string(name)](const std::string& v) { *type = kv_type_from_name(v, name); },
            std::string("stored type of the KV cache's ") + (type == &options.cache_type_k ? "keys" : "values") +
                ": f32, f16, bf16 or q8_0")
        ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0"}))
        ->default_str(dtype_name(*type));
  }
}

inline void add_sampling_options(CLI::App& command, SamplerParams& sampling) {
  command.add_option("--temp", sampling.temperature, "temperature (0: greedy)")->capture_default_str();
  command.add_option("--top-k", sampling.top_k, "top-k (0: off)")->capture_default_str();
  command.add_option("--top-p", sampling.top_p, "top-p (1: off)")->capture_default_str();
  command.add_option("--min-p", sampling.min_p, "min-p (0: off)")->capture_default_str();
  command.add_option("--repeat-penalty", sampling.repeat_penalty, "repetition penalty (1: off)")->capture_default_str();
  command.add_option("--repeat-last-n", sampling.repeat_last_n, "tokens the penalty looks back")->capture_default_str();
  command.add_option("--seed", sampling.seed, "sampling seed")->capture_default_str();
}

inline void add_engine_options(CLI::App& command, EngineOptions& options, int& threads) {
  command.add_option("--ctx", options.context, "context size in tokens (prompt + generated)")->capture_default_str();
  command.add_option("--batch", options.batch, "prefill chunk size in tokens")->capture_default_str();
  command.add_option("--kv-page", options.page_tokens, "KV page size in tokens per head")->capture_default_str();
  command.add_option("--threads", threads, "threads (0: all cores)")->capture_default_str();
  add_kv_type_options(command, options);
}

// --chat-template FILE: a Jinja file used instead of the model's tokenizer.chat_template
// (pass the path to ChatTemplate::for_model; empty means the model's own).
inline void add_chat_template_option(CLI::App& command, std::string& path) {
  command.add_option("--chat-template", path,
                     "Jinja chat template file, instead of the model's tokenizer.chat_template");
}

}  // namespace kvslim::cli
