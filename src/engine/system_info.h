// What this process runs on: the CPU, the instruction-set levels (tensor/isa.h) and the kernel
// each weight and KV page type gets at the active level. Shown by `kvslim info --system`,
// `kvslim bench --json` and the server's /props.
#pragma once

#include <nlohmann/json.hpp>

namespace kvslim {

// head_dim: the model's, for the attention kernel (0: left out).
nlohmann::json system_info(int head_dim = 0);

}  // namespace kvslim
