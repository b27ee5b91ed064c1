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
PressInfo lagkv_press();
PressInfo dapq_press();
PressInfo laq_press();
PressInfo h2o_press();
PressInfo pyramidkv_press();
PressInfo adakv_press();
PressInfo keydiff_press();
PressInfo exact_topk_press();
PressInfo quest_press();
PressInfo sparq_press();
PressInfo rocketkv_press();
PressInfo lookaheadkv_press();

}  // namespace kvslim
