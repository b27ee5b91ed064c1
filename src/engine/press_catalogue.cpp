#include "engine/press_catalogue.h"

#include "press/registry.h"

namespace kvslim {

nlohmann::json press_catalogue() {
  nlohmann::json out = nlohmann::json::array();
  for (const PressInfo& info : press_registry()) {
    nlohmann::json options = nlohmann::json::array();
    for (const OptionSpec& o : info.options)
      options.push_back({{"key", o.key}, {"default", o.default_value}, {"help", o.help}});
    out.push_back({{"name", info.name},
                   {"description", info.description},
                   {"options", options},
                   {"block_eviction", block_eviction_name(info.can.block_eviction)},
                   {"budget_rule", budget_rule_name(info.can.budget_rule)},
                   {"adakv_wraps", info.can.adakv_wraps},
                   {"multi_turn", multi_turn_name(info.can.multi_turn)}});
  }
  return out;
}

}  // namespace kvslim
