#include "train/adamw.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace kvslim::train {

namespace {

int64_t buffer_size(const std::vector<ParamTensor>& tensors) {
  int64_t size = 0;
  for (const ParamTensor& t : tensors) size = std::max(size, t.offset + t.size());
  return size;
}

}  // namespace

AdamW::AdamW(std::vector<ParamTensor> tensors, const AdamWConfig& config)
    : tensors_(std::move(tensors)),
      config_(config),
      m_(size_t(buffer_size(tensors_))),
      v_(size_t(buffer_size(tensors_))) {
  if (!(config.beta1 >= 0 && config.beta1 < 1) || !(config.beta2 >= 0 && config.beta2 < 1))
    fail("AdamW betas must be in [0, 1), got {} and {}", config.beta1, config.beta2);
  if (!(config.eps > 0) || !(config.weight_decay >= 0))
    fail("AdamW needs eps > 0 and weight decay >= 0, got {} and {}", config.eps, config.weight_decay);
}

void AdamW::update(float* params, const float* grads, float lr, ThreadPool& pool) {
  ++steps_;
  const float b1 = config_.beta1, b2 = config_.beta2, eps = config_.eps;
  const float c1 = float(1.0 / (1.0 - std::pow(double(b1), double(steps_))));
  const float c2 = float(1.0 / (1.0 - std::pow(double(b2), double(steps_))));
  for (const ParamTensor& t : tensors_) {
    const float decay = t.decay ? lr * config_.weight_decay : 0.0f;
    float* p = params + t.offset;
    const float* g = grads + t.offset;
    float* m = m_.data() + t.offset;
    float* v = v_.data() + t.offset;
    pool.parallel_for_fn(
        t.size(),
        [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            m[i] = b1 * m[i] + (1 - b1) * g[i];
            v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
            p[i] -= lr * (m[i] * c1) / (std::sqrt(v[i] * c2) + eps) + decay * p[i];
          }
        },
        4096);
  }
}

void AdamW::restore(std::vector<float> m, std::vector<float> v, int64_t steps) {
  if (m.size() != m_.size() || v.size() != v_.size())
    fail("AdamW state holds {} / {} moments, the model has {} parameters", m.size(), v.size(), m_.size());
  if (steps < 0) fail("AdamW step count {} is negative", steps);
  m_ = std::move(m);
  v_ = std::move(v);
  steps_ = steps;
}

double global_norm(const float* g, int64_t n, ThreadPool& pool) {
  // One partial sum per fixed-size chunk, added in chunk order: the same result for any pool.
  constexpr int64_t kChunk = 1 << 16;
  std::vector<double> partial(size_t((n + kChunk - 1) / kChunk));
  pool.parallel_for_fn(int64_t(partial.size()), [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      double s = 0;
      for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) s += double(g[i]) * g[i];
      partial[size_t(c)] = s;
    }
  });
  double total = 0;
  for (double s : partial) total += s;
  return std::sqrt(total);
}

double clip_global_norm(float* g, int64_t n, double max_norm, ThreadPool& pool) {
  const double norm = global_norm(g, n, pool);
  if (max_norm > 0 && norm > max_norm) {
    const float s = float(max_norm / norm);
    pool.parallel_for_fn(
        n,
        [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) g[i] *= s;
        },
        4096);
  }
  return norm;
}

}  // namespace kvslim::train
