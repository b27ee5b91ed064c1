// Every method by name: `kvslim generate --press NAME --press-opt key=value`, `kvslim presses`.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "press/options.h"
#include "press/press.h"

namespace kvslim {

struct PressInfo {
  std::string name;
  std::string description;  // one line
  std::vector<OptionSpec> options;
  std::function<std::unique_ptr<Press>(const PressOptions&)> make;
};

const std::vector<PressInfo>& press_registry();

// `name` may carry an argument after a colon (`adakv:tova`), passed as the option `scorer`.
// Throws kvslim::Error for an unknown name (listing the valid ones) or bad options.
std::unique_ptr<Press> make_press(const std::string& name, const std::vector<std::string>& options);

}  // namespace kvslim
