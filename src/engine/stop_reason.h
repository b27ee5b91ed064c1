// Why an answer stopped sampling. An enum inside the engine; the words users see (generate
// --json's "stop_reason", generate's and chat's stats lines) come from to_string alone.
#pragma once

#include <string_view>

namespace kvslim {

enum class StopReason {
  None,         // no answer yet (a turn's stats before its answer)
  Eos,          // an end-of-generation token was sampled
  Length,       // n_predict tokens generated
  Context,      // a head of the cache is full
  Interrupted,  // the caller's stop flag (Ctrl-C in chat)
};

// "none", "eos", "length", "context", "interrupted".
std::string_view to_string(StopReason reason);

}  // namespace kvslim
