// AdamW (Loshchilov & Hutter: weight decay decoupled from the adaptive step) over the model's
// flat parameter buffer, and global-norm gradient clipping. Weight decay applies to the tensors
// the layout marks (every matrix except the token embedding); norm weights and the embedding
// (also the tied output) are not decayed.
#pragma once

#include <cstdint>
#include <vector>

#include "train/train_model.h"
#include "util/thread_pool.h"

namespace kvslim::train {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

class AdamW {
 public:
  AdamW(const ParamLayout& layout, const AdamWConfig& config) : AdamW(layout.tensors(), config) {}
  // Any flat buffer described by its tensors (offsets into it; decay per tensor): the
  // LookaheadKV trainer's embeddings and LoRA, one undecayed tensor.
  AdamW(std::vector<ParamTensor> tensors, const AdamWConfig& config);

  // One update with learning rate lr (bias correction by the number of updates so far).
  void update(float* params, const float* grads, float lr, ThreadPool& pool);

  const AdamWConfig& config() const { return config_; }
  int64_t steps() const { return steps_; }
  const std::vector<float>& m() const { return m_; }
  const std::vector<float>& v() const { return v_; }
  // Resumes from saved moments; throws if their sizes differ from the layout's.
  void restore(std::vector<float> m, std::vector<float> v, int64_t steps);

 private:
  std::vector<ParamTensor> tensors_;
  AdamWConfig config_;
  std::vector<float> m_, v_;
  int64_t steps_ = 0;
};

// sqrt(sum g^2) over the buffer, accumulated in double.
double global_norm(const float* g, int64_t n, ThreadPool& pool);
// Scales g so its global norm is at most max_norm (no-op for max_norm <= 0); returns the norm
// before clipping.
double clip_global_norm(float* g, int64_t n, double max_norm, ThreadPool& pool);

}  // namespace kvslim::train
