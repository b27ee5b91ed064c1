// kvslim presses: every compression method with its options, defaults and description.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "press/registry.h"

namespace kvslim::cli {

void add_presses_command(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("presses", "list the compression methods with their options and defaults");
  cmd->add_flag("--json", *json, "print JSON");
  cmd->callback([json] {
    if (*json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& info : press_registry()) {
        nlohmann::json options = nlohmann::json::array();
        for (const auto& o : info.options) options.push_back({{"key", o.key}, {"default", o.default_value}, {"help", o.help}});
        out.push_back({{"name", info.name}, {"description", info.description}, {"options", options}});
      }
      fmt::print("{}\n", out.dump(2));
      return;
    }
    for (const auto& info : press_registry()) {
      fmt::print("{:<14} {}\n", info.name, info.description);
      for (const auto& o : info.options) fmt::print("{:>16}{:<26} {}\n", "", o.key + "=" + o.default_value, o.help);
    }
  });
}

}  // namespace kvslim::cli
