#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "util/error.h"

namespace kvslim {

void SamplerParams::validate() const {
  if (!(temperature >= 0) || !std::isfinite(temperature)) fail("--temp must be >= 0 (got {})", temperature);
  if (!(top_p > 0 && top_p <= 1)) fail("--top-p must be in (0, 1] (got {})", top_p);
  if (!(min_p >= 0 && min_p < 1)) fail("--min-p must be in [0, 1) (got {})", min_p);
  if (!(repeat_penalty > 0) || !std::isfinite(repeat_penalty))
    fail("--repeat-penalty must be > 0 (got {})", repeat_penalty);
  if (repeat_last_n < 0) fail("--repeat-last-n must be >= 0 (got {})", repeat_last_n);
}

Sampler::Sampler(const SamplerParams& params, int n_vocab)
    : params_(params), n_vocab_(n_vocab), rng_(params.seed), candidates_(n_vocab), penalized_(n_vocab) {
  params_.validate();
}

double Sampler::uniform() { return double(rng_() >> 11) * 0x1.0p-53; }

int32_t Sampler::argmax(const float* logits) const {
  int32_t best = 0;
  for (int32_t i = 1; i < n_vocab_; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

int32_t Sampler::sample(const float* logits, const std::vector<int32_t>& history) {
  if (params_.repeat_penalty != 1.0f && params_.repeat_last_n > 0) {
    // Penalise each distinct recent token once: shrink positive logits, grow negative ones.
    std::memcpy(penalized_.data(), logits, n_vocab_ * sizeof(float));
    const size_t from = history.size() > size_t(params_.repeat_last_n) ? history.size() - params_.repeat_last_n : 0;
    for (size_t i = from; i < history.size(); ++i) {
      const int32_t id = history[i];
      if (id < 0 || id >= n_vocab_ || penalized_[id] != logits[id]) continue;
      penalized_[id] = logits[id] > 0 ? logits[id] / params_.repeat_penalty : logits[id] * params_.repeat_penalty;
    }
    logits = penalized_.data();
  }
  if (params_.temperature <= 0) return argmax(logits);

  for (int32_t i = 0; i < n_vocab_; ++i) candidates_[i] = {i, logits[i], 0.0f};
  auto by_logit = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  size_t n = candidates_.size();
  if (params_.top_k > 0 && size_t(params_.top_k) < n) {
    std::partial_sort(candidates_.begin(), candidates_.begin() + params_.top_k, candidates_.end(), by_logit);
    n = params_.top_k;
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  auto softmax = [&](float temperature) {
    double sum = 0;
    for (size_t i = 0; i < n; ++i)
      sum += candidates_[i].p = std::exp((candidates_[i].logit - candidates_[0].logit) / temperature);
    for (size_t i = 0; i < n; ++i) candidates_[i].p = float(candidates_[i].p / sum);
  };
  softmax(1.0f);
  if (params_.top_p < 1.0f) {  // smallest prefix whose mass reaches top_p
    double mass = 0;
    size_t keep = n;
    for (size_t i = 0; i < n; ++i) {
      mass += candidates_[i].p;
      if (mass >= params_.top_p) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
  }
  if (params_.min_p > 0) {  // drop tokens less likely than min_p times the most likely
    const float threshold = candidates_[0].p * params_.min_p;
    size_t keep = 1;
    while (keep < n && candidates_[keep].p >= threshold) ++keep;
    n = keep;
  }
  softmax(params_.temperature);
  const double u = uniform();
  double cumulative = 0;
  for (size_t i = 0; i < n; ++i) {
    cumulative += candidates_[i].p;
    if (u < cumulative) return candidates_[i].id;
  }
  return candidates_[n - 1].id;
}

}  // namespace kvslim
