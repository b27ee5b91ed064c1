#include "engine/kv_layers_json.h"

#include "kv/layer_usage.h"

namespace kvslim {

nlohmann::json kv_layers_json(const PagedKvCache& cache) {
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerUsage& u : layer_usage(cache))
    layers.push_back({{"layer", u.layer},
                      {"kind", u.local ? "local" : "global"},
                      {"window", u.window},
                      {"tokens", u.tokens},
                      {"bytes", u.bytes}});
  return layers;
}

}  // namespace kvslim
