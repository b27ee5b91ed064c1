#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "util/error.h"

namespace kvslim::train {

float LrSchedule::at(int64_t step) const {
  if (step < warmup) return lr * float(step + 1) / float(warmup);
  const double span = double(std::max<int64_t>(1, total_steps - warmup));
  const double progress = std::min(1.0, double(step - warmup) / span);
  const double min_lr = double(lr) * min_ratio;
  return float(min_lr + 0.5 * (double(lr) - min_lr) * (1.0 + std::cos(std::numbers::pi * progress)));
}

void LrSchedule::validate() const {
  if (!(lr > 0)) fail("learning rate must be > 0, got {}", lr);
  if (warmup < 0) fail("warmup steps must be >= 0, got {}", warmup);
  if (total_steps < 1) fail("total steps must be >= 1, got {}", total_steps);
  if (!(min_ratio >= 0 && min_ratio <= 1)) fail("minimum learning-rate ratio must be in [0, 1], got {}", min_ratio);
}

}  // namespace kvslim::train
