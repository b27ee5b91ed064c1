#include "engine/stop_reason.h"

namespace kvslim {

std::string_view to_string(StopReason reason) {
  switch (reason) {
    case StopReason::None: return "none";
    case StopReason::Eos: return "eos";
    case StopReason::Length: return "length";
    case StopReason::Context: return "context";
    case StopReason::Interrupted: return "interrupted";
  }
  return "none";  // unreachable: every enumerator is listed above (-Wswitch checks)
}

}  // namespace kvslim
