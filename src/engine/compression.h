// The method and budget a command asks for (--press, --press-opt, --budget, --ratio,
// --prefill-evict), and prepare(): the one place that turns them into the press a session runs,
// the options it runs with and its budget. Every command, the server and eval build their press
// here, so no option is parsed and then ignored on one path.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
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

// --prefill-evict: End (evict once the prompt is cached) or Block (after every prefill block,
// docs/kv-cache.md). The words "end" and "block" are what the command line takes and the server's
// slot keys carry; to_string and parse_prefill_evict are the only places that spell them.
enum class PrefillEvict { End, Block };
std::string_view to_string(PrefillEvict p);
// "end" or "block"; anything else throws kvslim::Error naming the value and the two choices.
PrefillEvict parse_prefill_evict(std::string_view text);

// The method and its budget: either `budget` tokens per (layer, KV head), or `ratio` of the
// prompt evicted (B = floor(n * (1 - ratio))), or neither (no limit).
struct CompressionOptions {
  std::string press = "full";              // NAME or NAME:ARG (PressSpec)
  std::vector<std::string> press_options;  // key=value
  std::optional<int64_t> budget;           // must be > 0
  std::optional<double> ratio;             // must be in [0, 1)
  // --prefill-evict block is the method's option prefill=block; a method that always works
  // block-wise (KeyDiff) needs nothing; one without block-wise eviction refuses it.
  PrefillEvict prefill_evict = PrefillEvict::End;
  // The file a method's `adapter` option (LookaheadKV's) takes when press_options name none: what
  // the command found with find_default_adapter (--lookahead-adapter, or the adapter beside the
  // model), so that a request or a --press naming only the method runs it. Empty: there is none,
  // and such a method is refused, naming adapter_sought (where the command looked).
  std::string default_adapter;
  std::string adapter_sought;
  // A method defined outside the registry (a press written in Python, python/): used instead of
  // looking `press` up; its options, capabilities and factory are its own.
  std::shared_ptr<const PressInfo> custom;

  // Sets default_adapter: `flag` (--lookahead-adapter) when given, which must exist (kvslim::Error
  // naming it), else MODEL.lookahead.gguf beside model_path when that file exists
  // (model/lookahead_adapter.h: adapter_beside). generate, chat and serve call it.
  void find_default_adapter(const std::string& model_path, const std::string& flag);
  // True when the method has an `adapter` option, press_options give it none and there is no
  // default_adapter: effective_options() refuses it (the server first, in its own words).
  bool lacks_adapter() const;

  // Throws kvslim::Error for a bad budget or ratio.
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
