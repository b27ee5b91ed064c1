#include "eval/intrinsic_math.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvslim::eval {

std::vector<double> log_softmax(std::span<const float> logits) {
  const double top = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float x : logits) sum += std::exp(double(x) - top);
  const double log_z = top + std::log(sum);
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = double(logits[i]) - log_z;
  return out;
}

double kl_divergence(std::span<const double> log_p, std::span<const double> log_q) {
  double kl = 0;
  for (size_t i = 0; i < log_p.size(); ++i) {
    const double p = std::exp(log_p[i]);
    if (p > 0) kl += p * (log_p[i] - log_q[i]);
  }
  return std::max(kl, 0.0);  // two nearly equal distributions can round to a tiny negative sum
}

double relative_l2_error(std::span<const float> a, std::span<const float> ref) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = double(a[i]) - double(ref[i]);
    diff += d * d;
    norm += double(ref[i]) * ref[i];
  }
  if (norm == 0) return diff == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(diff / norm);
}

double recall(std::span<const int64_t> kept, std::span<const int64_t> oracle) {
  if (oracle.empty()) return 1.0;
  size_t hits = 0, k = 0;
  for (int64_t position : oracle) {
    while (k < kept.size() && kept[k] < position) ++k;
    if (k < kept.size() && kept[k] == position) ++hits;
  }
  return double(hits) / double(oracle.size());
}

}  // namespace kvslim::eval
