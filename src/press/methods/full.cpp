// full: no eviction (the reference every method is compared with).
#include "press/methods.h"

namespace kvslim {

namespace {
class FullPress final : public Press {};
}  // namespace

PressInfo full_press() {
  return {"full", "no compression: every token of every head is kept", {},
          [](const PressOptions&) { return std::make_unique<FullPress>(); }};
}

}  // namespace kvslim
