#include "press/registry.h"

#include <fmt/ranges.h>

#include "press/methods.h"
#include "util/error.h"

namespace kvslim {

const std::vector<PressInfo>& press_registry() {
  static const std::vector<PressInfo> registry = {
      full_press(), random_press(), streaming_llm_press(), knorm_press(), snapkv_press(), tova_press(),
      lagkv_press(), dapq_press(), laq_press(),
      h2o_press(), pyramidkv_press(), adakv_press(), keydiff_press(),
      exact_topk_press(), quest_press(), sparq_press(), rocketkv_press(),
      lookaheadkv_press(),
  };
  return registry;
}

std::unique_ptr<Press> make_press(const std::string& spec, const std::vector<std::string>& options) {
  const size_t colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  std::vector<std::string> all_options = options;
  if (colon != std::string::npos) all_options.push_back("scorer=" + spec.substr(colon + 1));
  for (const auto& info : press_registry())
    if (info.name == name) return info.make(PressOptions(info.name, info.options, all_options));
  std::vector<std::string> names;
  for (const auto& info : press_registry()) names.push_back(info.name);
  fail("unknown method '{}' (valid: {})", spec, fmt::join(names, ", "));
}

}  // namespace kvslim
