// Token embedding lookup and its scatter-add backward.
#include <algorithm>

#include "train/grad_ops.h"

namespace kvslim::train {

template <class T>
void embedding_forward(const T* table, const int32_t* tokens, int64_t n, int dim, T* out) {
  for (int64_t t = 0; t < n; ++t) std::copy_n(table + int64_t(tokens[t]) * dim, dim, out + t * dim);
}

// Serial over tokens: a token id repeated in the block adds to the same row, and a fixed order
// keeps the sum deterministic.
template <class T>
void embedding_backward(const T* d_out, const int32_t* tokens, int64_t n, int dim, T* d_table) {
  for (int64_t t = 0; t < n; ++t) {
    T* row = d_table + int64_t(tokens[t]) * dim;
    const T* g = d_out + t * dim;
    for (int i = 0; i < dim; ++i) row[i] += g[i];
  }
}

template void embedding_forward<float>(const float*, const int32_t*, int64_t, int, float*);
template void embedding_forward<double>(const double*, const int32_t*, int64_t, int, double*);
template void embedding_backward<float>(const float*, const int32_t*, int64_t, int, float*);
template void embedding_backward<double>(const double*, const int32_t*, int64_t, int, double*);

}  // namespace kvslim::train
