// The matrix products of training, through OpenBLAS in the scalar type at hand.
#include <cblas.h>

#include "train/grad_ops.h"

namespace kvslim::train {

namespace {

CBLAS_TRANSPOSE op(bool trans) { return trans ? CblasTrans : CblasNoTrans; }

// The ops already split their products across the ThreadPool (see train_model.h); OpenBLAS's
// own threads on top would oversubscribe the cores. Process-wide, as for inference.
void single_threaded_blas() {
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
}

}  // namespace

template <>
void gemm<float>(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  single_threaded_blas();
  cblas_sgemm(CblasRowMajor, op(trans_a), op(trans_b), int(m), int(n), int(k), alpha, a, int(lda), b, int(ldb), beta, c,
              int(ldc));
}

template <>
void gemm<double>(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                  int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  single_threaded_blas();
  cblas_dgemm(CblasRowMajor, op(trans_a), op(trans_b), int(m), int(n), int(k), alpha, a, int(lda), b, int(ldb), beta, c,
              int(ldc));
}

}  // namespace kvslim::train
