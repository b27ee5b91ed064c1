// The learning-rate schedule: linear warmup from 0, then cosine decay to min_ratio * lr at
// total_steps (and flat after).
#pragma once

#include <cstdint>

namespace kvslim::train {

struct LrSchedule {
  float lr = 1e-3f;
  int64_t warmup = 0;
  int64_t total_steps = 1;
  float min_ratio = 0.1f;

  // Learning rate of update `step` (0-based): lr * (step + 1) / warmup during the warmup.
  float at(int64_t step) const;
  void validate() const;  // throws naming the bad field
};

}  // namespace kvslim::train
