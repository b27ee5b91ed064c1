// Cross-entropy of next-token predictions, with a weight per token (the trainer weighs answer
// tokens 1 and prompt tokens less).
#include "train/grad_ops.h"
#include "train/softmax_row.h"
#include "util/error.h"

namespace kvslim::train {

namespace {
void check_targets(const int32_t* targets, int64_t n, int vocab) {
  for (int64_t t = 0; t < n; ++t)
    if (targets[t] < 0 || targets[t] >= vocab)
      fail("cross-entropy: target {} outside the vocabulary [0, {})", targets[t], vocab);
}
}  // namespace

template <class T>
double cross_entropy_forward(T* logits, const int32_t* targets, const float* weights, int64_t n, int vocab, double* nll,
                             ThreadPool& pool) {
  check_targets(targets, n, vocab);
  pool.parallel_for_fn(n, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      T* row = logits + t * vocab;
      const double target_logit = row[targets[t]];
      nll[t] = softmax_row(row, vocab) - target_logit;
    }
  });
  double loss = 0;  // summed in token order, independent of the thread split
  for (int64_t t = 0; t < n; ++t) loss += double(weights[t]) * nll[t];
  return loss;
}

template <class T>
void cross_entropy_backward(T* probs, const int32_t* targets, const float* weights, int64_t n, int vocab, T scale,
                            ThreadPool& pool) {
  check_targets(targets, n, vocab);
  pool.parallel_for_fn(n, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      T* row = probs + t * vocab;
      const T s = scale * T(weights[t]);
      row[targets[t]] -= T(1);
      for (int i = 0; i < vocab; ++i) row[i] *= s;
    }
  });
}

template double cross_entropy_forward<float>(float*, const int32_t*, const float*, int64_t, int, double*, ThreadPool&);
template double cross_entropy_forward<double>(double*, const int32_t*, const float*, int64_t, int, double*,
                                              ThreadPool&);
template void cross_entropy_backward<float>(float*, const int32_t*, const float*, int64_t, int, float, ThreadPool&);
template void cross_entropy_backward<double>(double*, const int32_t*, const float*, int64_t, int, double, ThreadPool&);

}  // namespace kvslim::train
