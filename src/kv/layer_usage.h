// What each layer of a paged cache holds: its kind (a sliding-window "local" layer bounded by
// its window, or a "global" layer that the compression method governs), its tokens summed over
// the KV heads and the bytes of the pages they occupy. kvslim inspect, generate --json and the
// server's `kv` object report it, so that a sliding-window model's memory reads as
// window x local layers + budget x global layers.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/paged_cache.h"

namespace kvslim {

struct LayerUsage {
  int layer = 0;
  bool local = false;
  int window = 0;      // 0 for a global layer
  int64_t tokens = 0;  // summed over the layer's KV heads
  uint64_t bytes = 0;  // pages the layer's heads hold (pages round up)
};

std::vector<LayerUsage> layer_usage(const PagedKvCache& cache);

}  // namespace kvslim
