// The per-layer report of a KV cache (kv/layer_usage.h) as JSON, one object per layer:
// {"layer", "kind": "local" | "global", "window", "tokens", "bytes"}. One format for kvslim
// inspect, generate --json and the server's `kv` object.
#pragma once

#include <nlohmann/json.hpp>

#include "kv/paged_cache.h"

namespace kvslim {

nlohmann::json kv_layers_json(const PagedKvCache& cache);

}  // namespace kvslim
