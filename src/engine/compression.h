// The method and budget a command asks for (--press, --press-opt, --budget, --ratio,
// --prefill-evict), and prepare(): the one place that turns them into the press a session runs,
// the options it runs with and its budget. Every command, the server and eval build their press
// here, so no option is parsed and then ignored on one path.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "press/press.h"
#include "press/registry.h"

namespace kvslim {

// A method ready to run: built by CompressionOptions::prepare only.
struct PreparedCompression {
  std::unique_ptr<Press> press;
  PressSpec spec;
  // The options the method was built with, --prefill-evict block included (as prefill=block):
  // what a KV file stores, so that a loaded session runs the same method.
  std::vector<std::string> options;
  std::optional<int64_t> budget;
  std::optional<double> ratio;

  // Tokens per (layer, KV head) for a prompt of n_prompt tokens: the budget, or what --ratio
  // leaves of the prompt (B = max(1, floor(n * (1 - ratio)))), or kNoBudget.
  int64_t budget_for(int64_t n_prompt) const;
};

// The method and its budget: either `budget` tokens per (layer, KV head), or `ratio` of the
// prompt evicted (B = floor(n * (1 - ratio))), or neither (no limit).
struct CompressionOptions {
  std::string press = "full";              // NAME or NAME:ARG (PressSpec)
  std::vector<std::string> press_options;  // key=value
  std::optional<int64_t> budget;           // must be > 0
  std::optional<double> ratio;             // must be in [0, 1)
  // --prefill-evict: "end" (evict once the prompt is cached) or "block" (after every prefill
  // block, docs/kv-cache.md): the method's option prefill=block; a method that always works
  // block-wise (KeyDiff) needs nothing; one without block-wise eviction refuses it.
  std::string prefill_evict = "end";
  // A method defined outside the registry (a press written in Python, python/): used instead of
  // looking `press` up; its options, capabilities and factory are its own.
  std::shared_ptr<const PressInfo> custom;

  // Throws kvslim::Error for a bad budget, ratio or --prefill-evict value.
  void validate() const;
  // The method as the user named it (throws kvslim::Error for an unknown name).
  PressSpec spec() const { return custom ? PressSpec{custom.get(), std::nullopt} : PressSpec::parse(press); }
  // press_options plus what --prefill-evict adds; throws kvslim::Error naming the method, and the
  // ones that have it, when --prefill-evict block meets a method without block-wise eviction.
  std::vector<std::string> effective_options() const;
  // The method with effective_options() (the press prepare() returns; tests use it directly).
  std::unique_ptr<Press> make_press() const;
  // Everything above checked and built, and an explicit --budget checked against the method's
  // options (Press::check_budget), before any work is done.
  PreparedCompression prepare() const;
  // The server's reading of --prefill-evict block: a setting for the methods that have block-wise
  // eviction (requests choose their method); with a method without it, these options with "end".
  CompressionOptions with_block_eviction_where_supported() const;
};

}  // namespace kvslim
