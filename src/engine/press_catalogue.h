// The registry as JSON: every method with its options and what it can do (PressCapabilities).
// Shown by `kvslim presses --json` and the server's /props, so both say the same.
#pragma once

#include <nlohmann/json.hpp>

namespace kvslim {

nlohmann::json press_catalogue();

}  // namespace kvslim
