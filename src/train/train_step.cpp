#include "train/train_step.h"

#include "util/error.h"

namespace kvslim::train {

std::vector<std::vector<TrainSequence>> micro_batches(const std::vector<TrainSequence>& batch, int64_t micro_tokens) {
  std::vector<std::vector<TrainSequence>> out;
  int64_t tokens = 0;
  for (const TrainSequence& s : batch) {
    const int64_t n = int64_t(s.tokens.size()) - 1;
    if (out.empty() || tokens + n > micro_tokens) {
      out.emplace_back();
      tokens = 0;
    }
    out.back().push_back(s);
    tokens += n;
  }
  return out;
}

StepStats train_step(TrainModel<float>& model, AdamW& optimizer, const std::vector<TrainSequence>& batch,
                     const StepOptions& options, ThreadPool& pool) {
  StepStats stats;
  for (const TrainSequence& s : batch) {
    for (size_t t = 1; t < s.weights.size(); ++t) stats.weight += s.weights[t];
    stats.tokens += int64_t(s.tokens.size()) - 1;
  }
  if (!(stats.weight > 0)) fail("training batch of {} sequences has no positive loss weight", batch.size());
  model.zero_grads();
  double loss = 0;
  for (const auto& micro : micro_batches(batch, options.micro_tokens)) {
    loss += model.forward(micro, pool);
    for (size_t t = 0; t < model.token_nll().size(); ++t)
      if (model.token_weights()[t] >= 1.0f) {
        stats.answer_loss += model.token_nll()[t];
        ++stats.answer_tokens;
      }
    model.backward(float(1.0 / stats.weight), pool);
  }
  stats.loss = loss / stats.weight;
  if (stats.answer_tokens > 0) stats.answer_loss /= double(stats.answer_tokens);
  stats.grad_norm = clip_global_norm(model.grads().data(), int64_t(model.grads().size()), options.clip, pool);
  stats.lr = options.schedule.at(optimizer.steps());
  optimizer.update(model.params().data(), model.grads().data(), stats.lr, pool);
  return stats;
}

}  // namespace kvslim::train
