// kvslim presses: every compression method with its options, defaults, description and capabilities.
#include <fmt/format.h>

#include "cli/commands.h"
#include "engine/press_catalogue.h"
#include "press/registry.h"

namespace kvslim::cli {

void add_presses_command(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("presses", "list the compression methods with their options and defaults");
  cmd->add_flag("--json", *json, "print JSON");
  cmd->callback([json] {
    if (*json) {
      fmt::print("{}\n", press_catalogue().dump(2));
      return;
    }
    for (const auto& info : press_registry()) {
      fmt::print("{:<14} {}\n", info.name, info.description);
      fmt::print("{:>16}block-wise prefill eviction: {}; budget rule: {}; adakv wraps it: {}; multi-turn: {}\n", "",
                 block_eviction_name(info.can.block_eviction), budget_rule_name(info.can.budget_rule),
                 info.can.adakv_wraps ? "yes" : "no", multi_turn_name(info.can.multi_turn));
      for (const auto& o : info.options) fmt::print("{:>16}{:<26} {}\n", "", o.key + "=" + o.default_value, o.help);
    }
  });
}

}  // namespace kvslim::cli
