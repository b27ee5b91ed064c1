// One optimisation step: gradients of the batch's mean weighted loss, accumulated over
// micro-batches (so activations stay bounded), global-norm clipping, then AdamW at the
// schedule's learning rate for step optimizer.steps().
#pragma once

#include <cstdint>
#include <vector>

#include "train/adamw.h"
#include "train/lr_schedule.h"
#include "train/train_model.h"
#include "util/thread_pool.h"

namespace kvslim::train {

struct StepOptions {
  LrSchedule schedule;
  double clip = 1.0;            // global gradient norm limit; <= 0 disables clipping
  int64_t micro_tokens = 8192;  // tokens per forward/backward; a longer sequence runs alone
};

struct StepStats {
  double loss = 0;         // sum(weight * nll) / sum(weight) over the batch
  double weight = 0;       // sum of the loss weights of the batch
  double answer_loss = 0;  // mean nll of the tokens of weight >= 1 (train-model: answers and EOS)
  int64_t answer_tokens = 0;
  double grad_norm = 0;  // before clipping
  float lr = 0;
  int64_t tokens = 0;  // tokens processed (inputs of every sequence)
};

// Throws if the batch carries no loss weight (nothing to learn from).
StepStats train_step(TrainModel<float>& model, AdamW& optimizer, const std::vector<TrainSequence>& batch,
                     const StepOptions& options, ThreadPool& pool);

// Splits a batch into consecutive groups of whole sequences of at most micro_tokens inputs each.
std::vector<std::vector<TrainSequence>> micro_batches(const std::vector<TrainSequence>& batch, int64_t micro_tokens);

}  // namespace kvslim::train
