// Reproducible Gaussian test data shared by the kernel tests.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace kvslim::test {

// n values drawn from N(0, stddev^2) by a generator seeded with `seed`.
inline std::vector<float> normal_vec(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace kvslim::test
