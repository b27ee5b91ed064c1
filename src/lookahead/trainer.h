// `kvslim train-lookahead`: trains a LookaheadKV adapter for a frozen model (LookaheadKV §3.2,
// Algorithm 1). Data: response_data.h; per example the ground truth and the prompt KV are
// computed once by the inference engine (prompt_target.h) and kept in memory, so a step only
// runs the m lookahead rows forward and backward (objective.h). Optimiser: Adam (beta 0.9 /
// 0.999, no weight decay) over the embeddings and the LoRA, linear warmup then cosine decay to
// 10% (train/lr_schedule.h), global-norm clipping (train/adamw.h); the batch's gradient is the
// mean of its prompts'. Deterministic for a seed (initialisation and sample order).
#pragma once

#include <cstdint>
#include <functional>

#include "model/lookahead_adapter.h"
#include "lookahead/response_data.h"
#include "model/model.h"
#include "util/thread_pool.h"

namespace kvslim {

struct LookaheadTrainOptions {
  AdapterShape shape;
  ResponseDataOptions data;
  int steps = 300;
  int batch = 4;  // prompts per step
  float lr = 2e-3f;
  int warmup = -1;         // steps; < 0: 5% of the steps
  double clip = 1.0;       // global gradient norm; <= 0: off
  int eval_every = 50;     // steps between held-out evaluations (0: start and end only)
  int recall_budget = 64;  // B of the held-out recall
  uint64_t seed = 1;
  void validate() const;
};

// Held-out quality: the loss (mean KL) and recall@B, the fraction of the B tokens with the most
// ground-truth attention (group mean) that the press's own rule keeps (group mean of the
// prediction, max-pool 7, top B), averaged over layers, KV heads and prompts longer than B; and,
// for reference, SnapKV's recall@B on the same prompts (its defaults: window 32, max-pool 7).
struct HeldOutMetrics {
  double kl = 0;
  double recall = 0;
  double snapkv_recall = 0;
};

struct TrainProgress {
  enum class Phase { Responses, Targets, Training } phase;
  int done = 0, total = 0;  // prompts (Responses, Targets) or steps (Training)
  double loss = 0;          // Training: the step's mean KL
  float lr = 0;
  double grad_norm = 0;
};

struct TrainCallbacks {
  std::function<void(const TrainProgress&)> progress;
  std::function<void(int step, const HeldOutMetrics&)> heldout;  // step 0: before training
};

struct TrainSummary {
  int train_examples = 0, heldout_examples = 0, skipped = 0;  // skipped: empty responses
  double data_seconds = 0, train_seconds = 0;
  double target_bytes = 0;  // memory the examples take
  HeldOutMetrics initial, final;
};

// Trains from `start` (an initial or earlier adapter of this model) and returns the adapter.
LookaheadAdapter train_lookahead(const Model& model, ThreadPool& pool, const LookaheadTrainOptions& options,
                                 const LookaheadAdapter& start, const TrainCallbacks& callbacks, TrainSummary& summary);

}  // namespace kvslim
