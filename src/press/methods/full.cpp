// full: no eviction (the reference every method is compared with).
#include "press/methods.h"

namespace kvslim {

namespace {
class FullPress final : public Press {};
}  // namespace

PressInfo full_press() {
  return {"full",
          "no compression: every token of every head is kept",
          {},
          [](const PressOptions&) { return std::make_unique<FullPress>(); },
          {.block_eviction = BlockEviction::None,
           .budget_rule = BudgetRule::NoEviction,
           .adakv_wraps = false,
           .multi_turn = MultiTurnRule::KeepAll}};
}

}  // namespace kvslim
