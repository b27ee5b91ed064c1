// The PressInfo of each method, one per file under src/press/methods/.
#pragma once

#include "press/registry.h"

namespace kvslim {

PressInfo full_press();
PressInfo random_press();
PressInfo streaming_llm_press();
PressInfo knorm_press();
PressInfo snapkv_press();
PressInfo tova_press();

}  // namespace kvslim
