// Every method by name: `kvslim generate --press NAME --press-opt key=value`, `kvslim presses`.
// What each method can do (block-wise eviction, its budget rule, whether adakv can wrap it, its
// multi-turn rule) is declared here with the method, so that the engine, the server, eval and the
// tests ask the registry instead of testing method names.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "press/options.h"
#include "press/press.h"

namespace kvslim {

// Whether a method can evict after every prefill block (docs/kv-cache.md).
enum class BlockEviction {
  None,    // refuses --prefill-evict block
  Option,  // through its option prefill=block, which --prefill-evict block sets
  Always,  // block by block whatever --prefill-evict says (KeyDiff)
};

// How the tokens kept after prefill relate to the budget B (the invariant suite checks each).
enum class BudgetRule {
  PerHead,      // every (layer, KV head) keeps at most B
  PerLayer,     // a layer's heads keep at most H_kv * B together (AdaKV)
  PerModel,     // all layers together keep at most L * H_kv * B (PyramidKV)
  NoEviction,   // the prompt stays whole (full, decode-time sparse attention)
  OwnSchedule,  // the method's own schedule (LagKV's ratio, RocketKV's stage-1 split)
};

// What a method does at a later turn of a conversation (docs/conversations.md), with its defaults.
enum class MultiTurnRule {
  SelectAgain,  // selects afresh over what is kept plus the new tokens; carries no state
  CarryOver,    // carries state across turns, which KV files hold (Press::save_state: H2O, LagKV)
  Continue,     // block-wise: every block of every turn is cut back to the budget (KeyDiff)
  KeepAll,      // evicts nothing
};

struct PressCapabilities {
  BlockEviction block_eviction = BlockEviction::None;
  BudgetRule budget_rule = BudgetRule::PerHead;
  bool adakv_wraps = false;  // score-based: adakv can rank its scores across a layer's heads
  MultiTurnRule multi_turn = MultiTurnRule::SelectAgain;
};

struct PressInfo {
  std::string name;
  std::string description;  // one line
  std::vector<OptionSpec> options;
  std::function<std::unique_ptr<Press>(const PressOptions&)> make;
  PressCapabilities can;
};

const std::vector<PressInfo>& press_registry();

// Names for reports (`kvslim presses`, the server's /props).
std::string_view block_eviction_name(BlockEviction b);
std::string_view budget_rule_name(BudgetRule r);
std::string_view multi_turn_name(MultiTurnRule r);

// A method as users write it, parsed once: NAME, or NAME:ARG where ARG is passed as the option
// `scorer` (adakv:tova).
struct PressSpec {
  const PressInfo* info = nullptr;  // never null after parse()
  std::optional<std::string> arg;

  // Throws kvslim::Error for an unknown name, listing the valid ones.
  static PressSpec parse(const std::string& text);
  const std::string& name() const { return info->name; }
  const PressCapabilities& can() const { return info->can; }
  // The method with `options` (key=value) and the argument; throws kvslim::Error for bad options.
  std::unique_ptr<Press> make(std::vector<std::string> options) const;
};

// PressSpec::parse(spec).make(options).
std::unique_ptr<Press> make_press(const std::string& spec, const std::vector<std::string>& options);

}  // namespace kvslim
