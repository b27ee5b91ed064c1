// The arithmetic of the intrinsic metrics, kept apart from the sessions that feed it so each
// formula can be checked against hand-computed values.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kvslim::eval {

// log softmax(logits), in double.
std::vector<double> log_softmax(std::span<const float> logits);

// KL(p || q) = sum_i p_i (log p_i - log q_i) of two distributions given by their log
// probabilities (terms with p_i = 0 contribute 0).
double kl_divergence(std::span<const double> log_p, std::span<const double> log_q);

// ||a - ref||_2 / ||ref||_2; 0 when both are zero, +inf when only ref is.
double relative_l2_error(std::span<const float> a, std::span<const float> ref);

// |kept ∩ oracle| / |oracle| for two strictly ascending position lists; 1 for an empty oracle.
double recall(std::span<const int64_t> kept, std::span<const int64_t> oracle);

}  // namespace kvslim::eval
