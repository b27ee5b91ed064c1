// snapkv: the last `window` prompt queries vote (sum of their attention probabilities, group
// mean), scores are pooled along the sequence, and the window plus the top (budget - window)
// prefix tokens are kept. The scoring lives in press/snapkv_scores.h (shared with pyramidkv).
#include "press/methods.h"
#include "press/snapkv_scores.h"

namespace kvslim {

PressInfo snapkv_press() {
  return {"snapkv", "window queries vote on the prefix (pooled); keeps the window plus the top prefix tokens",
          snapkv_option_specs(),
          [](const PressOptions& o) { return std::make_unique<SnapKvScorer>("snapkv", snapkv_settings(o)); }};
}

}  // namespace kvslim
