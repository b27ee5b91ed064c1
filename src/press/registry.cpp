#include "press/registry.h"

#include <fmt/ranges.h>

#include "press/methods.h"
#include "util/error.h"

namespace kvslim {

const std::vector<PressInfo>& press_registry() {
  static const std::vector<PressInfo> registry = {
      full_press(),    random_press(),     streaming_llm_press(), knorm_press(), snapkv_press(),    tova_press(),
      lagkv_press(),   dapq_press(),       laq_press(),           h2o_press(),   pyramidkv_press(), adakv_press(),
      keydiff_press(), exact_topk_press(), quest_press(),         sparq_press(), rocketkv_press(),  lookaheadkv_press(),
  };
  return registry;
}

std::string_view block_eviction_name(BlockEviction b) {
  switch (b) {
    case BlockEviction::None: return "none";
    case BlockEviction::Option: return "option";
    case BlockEviction::Always: return "always";
  }
  return "?";
}

std::string_view budget_rule_name(BudgetRule r) {
  switch (r) {
    case BudgetRule::PerHead: return "per_head";
    case BudgetRule::PerLayer: return "per_layer";
    case BudgetRule::PerModel: return "per_model";
    case BudgetRule::NoEviction: return "no_eviction";
    case BudgetRule::OwnSchedule: return "own_schedule";
  }
  return "?";
}

std::string_view multi_turn_name(MultiTurnRule r) {
  switch (r) {
    case MultiTurnRule::SelectAgain: return "select_again";
    case MultiTurnRule::CarryOver: return "carry_over";
    case MultiTurnRule::Continue: return "continue";
    case MultiTurnRule::KeepAll: return "keep_all";
  }
  return "?";
}

PressSpec PressSpec::parse(const std::string& text) {
  const size_t colon = text.find(':');
  const std::string name = text.substr(0, colon);
  for (const PressInfo& info : press_registry())
    if (info.name == name)
      return {&info, colon == std::string::npos ? std::nullopt : std::optional(text.substr(colon + 1))};
  std::vector<std::string> names;
  for (const PressInfo& info : press_registry()) names.push_back(info.name);
  fail("unknown method '{}' (valid: {})", text, fmt::join(names, ", "));
}

std::unique_ptr<Press> PressSpec::make(std::vector<std::string> options) const {
  if (arg) options.push_back("scorer=" + *arg);
  return info->make(PressOptions(info->name, info->options, options));
}

std::unique_ptr<Press> make_press(const std::string& spec, const std::vector<std::string>& options) {
  return PressSpec::parse(spec).make(options);
}

}  // namespace kvslim
