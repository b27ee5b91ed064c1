// snapkv: the last `window` prompt queries vote (sum of their attention probabilities, group
// mean), scores are pooled along the sequence, and the window plus the top (budget - window)
// prefix tokens are kept. The scoring lives in press/snapkv_scores.h (shared with pyramidkv).
#include "press/methods.h"
#include "press/snapkv_scores.h"

namespace kvslim {

PressInfo snapkv_press() {
  return {"snapkv", "window queries vote on the prefix (pooled); keeps the window plus the top prefix tokens",
          [] {
            std::vector<OptionSpec> specs = snapkv_option_specs();
            specs.push_back(prefill_evict_option());
            return specs;
          }(),
          [](const PressOptions& o) {
            SnapKvSettings settings = snapkv_settings(o);
            settings.block = block_eviction(o);
            return std::make_unique<SnapKvScorer>("snapkv", settings);
          }};
}

}  // namespace kvslim
