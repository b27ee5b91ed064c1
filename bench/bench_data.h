// Random inputs the benchmarks share: normal floats, and KV caches filled with them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "kv/paged_cache.h"

namespace kvslim::bench {

// n floats from N(0, 1), the same for the same seed.
inline std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Appends `context` tokens (positions 0 .. context - 1) of random keys and values to layer 0 of
// `cache`, 512 at a time.
inline void fill_layer0(PagedKvCache& cache, int64_t context, int64_t kv_dim) {
  const int64_t block = 512;
  for (int64_t start = 0; start < context; start += block) {
    const int n = int(std::min(block, context - start));
    const auto k = random_floats(size_t(n * kv_dim), uint32_t(start + 1));
    const auto v = random_floats(size_t(n * kv_dim), uint32_t(start + 2));
    std::vector<int64_t> pos(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) pos[size_t(i)] = start + i;
    cache.append(0, k.data(), v.data(), n, pos.data());
  }
}

}  // namespace kvslim::bench
