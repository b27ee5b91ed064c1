// The public attention kernels: each forwards to the active instruction-set level's build.
#include "kv/attention.h"
#include "kv/attention_isa.h"
#include "tensor/isa_dispatch.h"

namespace kvslim {

void attend_dense(const PagedKv& kv, const float* q, int64_t q_stride, int n_q_heads, int64_t n_q, float* out,
                  int64_t out_stride, AttentionScratch& scratch, SoftmaxRowObserver* observer) {
  KVSLIM_ISA_DISPATCH(attend_dense(kv, q, q_stride, n_q_heads, n_q, out, out_stride, scratch, observer));
}

void attention_scores(const PagedKv& kv, const float* q, int n_q_heads, float* s, int64_t s_stride,
                      AttentionScratch& scratch) {
  KVSLIM_ISA_DISPATCH(attention_scores(kv, q, n_q_heads, s, s_stride, scratch));
}

void key_scores(const PagedKv& kv, const float* q, int n_q_heads, float scale, float* s, int64_t s_stride,
                AttentionScratch& scratch) {
  KVSLIM_ISA_DISPATCH(key_scores(kv, q, n_q_heads, scale, s, s_stride, scratch));
}

const char* attention_kernel(DType kv_type, int head_dim) { KVSLIM_ISA_DISPATCH(attention_kernel(kv_type, head_dim)); }

void attend_sparse(const PagedKv& kv, std::span<const int32_t> indices, const float* q, int n_q_heads, float* out,
                   AttentionScratch& scratch) {
  KVSLIM_ISA_DISPATCH(attend_sparse(kv, indices, q, n_q_heads, out, scratch));
}

}  // namespace kvslim
