#include "lookahead/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "lookahead/objective.h"
#include "lookahead/prompt_target.h"
#include "press/select.h"
#include "press/methods/snapkv.h"
#include "tasks/rng.h"
#include "train/adamw.h"
#include "train/lr_schedule.h"
#include "util/error.h"

namespace kvslim {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

constexpr int kPoolKernel = 7;  // the press's default pooling

// The examples of one split, without the prompts the model answered with nothing; with
// window_votes, also SnapKV's votes of each (held-out) example.
std::vector<PromptTarget<float>> targets(const Model& model, ThreadPool& pool,
                                         const std::vector<ResponseSample>& samples, const TrainCallbacks& callbacks,
                                         TrainSummary& summary,
                                         std::vector<std::vector<float>>* window_votes = nullptr) {
  std::vector<PromptTarget<float>> out;
  for (size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].response.empty()) {
      ++summary.skipped;
    } else {
      std::vector<float>* votes = nullptr;
      if (window_votes) votes = &window_votes->emplace_back();
      out.push_back(prompt_target(model, pool, samples[i].prompt, samples[i].response, votes, SnapKvSettings{}.window));
      summary.target_bytes +=
          double(out.back().keys.size() + out.back().values.size() + out.back().importance.size()) * sizeof(float);
    }
    if (callbacks.progress) callbacks.progress({TrainProgress::Phase::Targets, int(i + 1), int(samples.size())});
  }
  return out;
}

// Mean over the group's query heads of one layer's per-head rows ([q head][n]).
std::vector<float> group_mean(const ModelConfig& c, int kv_head, int64_t n,
                              const std::function<const float*(int)>& row) {
  std::vector<float> mean(size_t(n), 0.0f);
  const int group = c.group_size();
  for (int h = kv_head * group; h < (kv_head + 1) * group; ++h) {
    const float* r = row(h);
    for (int64_t j = 0; j < n; ++j) mean[j] += r[j] / float(group);
  }
  return mean;
}

// |a ∩ b| / budget for two ascending index lists.
double overlap(const std::vector<int32_t>& a, const std::vector<int32_t>& b, int budget) {
  std::vector<int32_t> both;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
  return double(both.size()) / budget;
}

std::vector<float> truth_group_mean(const ModelConfig& c, const PromptTarget<float>& t, int layer, int kv_head) {
  return group_mean(c, kv_head, t.n, [&](int h) { return &t.importance[(size_t(layer) * c.n_heads + h) * t.n]; });
}

// SnapKV's recall@B on the held-out prompts (fixed: it learns nothing).
double snapkv_recall(const std::vector<PromptTarget<float>>& heldout, const std::vector<std::vector<float>>& votes,
                     const ModelConfig& c, int budget) {
  const SnapKvSettings snap;
  double recall = 0;
  int64_t heads = 0;
  for (size_t i = 0; i < heldout.size(); ++i) {
    const PromptTarget<float>& t = heldout[i];
    if (t.n <= budget) continue;
    for (int l = 0; l < c.n_layers; ++l)
      for (int g = 0; g < c.n_kv_heads; ++g) {
        const std::vector<float> v =
            group_mean(c, g, t.n, [&](int h) { return &votes[i][(size_t(l) * c.n_heads + h) * t.n]; });
        const int64_t prefix = std::max<int64_t>(0, t.n - snap.window);
        const std::vector<float> pooled = pool1d(std::span<const float>(v).first(prefix), snap.kernel, snap.pooling);
        recall += overlap(top_k_ascending(truth_group_mean(c, t, l, g), budget),
                          window_plus_top(pooled, t.n, snap.window, budget), budget);
        ++heads;
      }
  }
  return heads ? recall / double(heads) : 0.0;
}

HeldOutMetrics evaluate_heldout(LookaheadObjective<float>& objective, const std::vector<float>& params,
                                const std::vector<PromptTarget<float>>& heldout, const ModelConfig& c, int budget,
                                ThreadPool& pool) {
  HeldOutMetrics m;
  int64_t recall_heads = 0;
  for (const PromptTarget<float>& t : heldout) {
    m.kl += objective.evaluate(params.data(), t, nullptr, pool);
    if (t.n <= budget) continue;
    for (int l = 0; l < c.n_layers; ++l)
      for (int g = 0; g < c.n_kv_heads; ++g) {
        const std::vector<float> pred = group_mean(c, g, t.n, [&](int h) { return objective.prompt_attention(l, h); });
        m.recall += overlap(top_k_ascending(truth_group_mean(c, t, l, g), budget),
                            top_k_ascending(pool1d(pred, kPoolKernel, PoolKind::Max), budget), budget);
        ++recall_heads;
      }
  }
  m.kl /= double(std::max<size_t>(1, heldout.size()));
  m.recall = recall_heads ? m.recall / double(recall_heads) : 0.0;
  return m;
}

}  // namespace

void LookaheadTrainOptions::validate() const {
  shape.validate();
  if (steps < 1) fail("--steps must be >= 1 (got {})", steps);
  if (batch < 1) fail("--batch must be >= 1 (got {})", batch);
  if (!(lr > 0)) fail("--lr must be > 0 (got {})", lr);
  if (warmup > steps) fail("--warmup {} exceeds --steps {}", warmup, steps);
  if (eval_every < 0) fail("--eval-every must be >= 0 (got {})", eval_every);
  if (recall_budget < 1) fail("--recall-budget must be >= 1 (got {})", recall_budget);
}

LookaheadAdapter train_lookahead(const Model& model, ThreadPool& pool, const LookaheadTrainOptions& options,
                                 const LookaheadAdapter& start, const TrainCallbacks& callbacks,
                                 TrainSummary& summary) {
  options.validate();
  const ModelConfig& c = model.config();
  if (!start.lora.fits(c) || start.embd.size() != size_t(start.n_lookahead) * c.dim)
    fail("the starting adapter does not fit the model");

  // Data: responses (cached on disk), then each example's truth and prompt KV.
  auto t0 = Clock::now();
  auto responses_progress = [&](int done, int total) {
    if (callbacks.progress) callbacks.progress({TrainProgress::Phase::Responses, done, total});
  };
  const std::vector<ResponseSample> train_samples =
      response_samples(model, pool, options.data, false, responses_progress);
  const std::vector<ResponseSample> heldout_samples =
      response_samples(model, pool, options.data, true, responses_progress);
  const std::vector<PromptTarget<float>> train = targets(model, pool, train_samples, callbacks, summary);
  std::vector<std::vector<float>> heldout_votes;
  const std::vector<PromptTarget<float>> heldout =
      targets(model, pool, heldout_samples, callbacks, summary, &heldout_votes);
  const double snapkv = snapkv_recall(heldout, heldout_votes, c, options.recall_budget);
  if (train.empty()) fail("the model answered every training prompt with nothing: no example to train on");
  summary.train_examples = int(train.size());
  summary.heldout_examples = int(heldout.size());
  summary.data_seconds = seconds_since(t0);

  const FrozenModel<float> base(model);
  LookaheadObjective<float> objective(base, start.n_lookahead, start.lora.layout(), start.lora.scale());
  std::vector<float> params(start.embd.begin(), start.embd.end());
  params.insert(params.end(), start.lora.params().begin(), start.lora.params().end());
  const int64_t n_params = int64_t(params.size());
  std::vector<float> grads(params.size()), sample_grads(params.size());
  // Adam over the learned rows and the LoRA as one flat tensor: no weight decay and beta2 0.999,
  // this trainer's settings before it shared train/'s AdamW.
  train::AdamW adam({{"lookahead", 0, 1, n_params, false}},
                    {.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0});

  train::LrSchedule schedule;
  schedule.lr = options.lr;
  schedule.warmup = options.warmup >= 0 ? options.warmup : options.steps / 20;
  schedule.total_steps = options.steps;
  schedule.validate();

  auto heldout_metrics = [&] {
    HeldOutMetrics m = evaluate_heldout(objective, params, heldout, c, options.recall_budget, pool);
    m.snapkv_recall = snapkv;
    return m;
  };
  summary.initial = heldout_metrics();
  if (callbacks.heldout) callbacks.heldout(0, summary.initial);

  t0 = Clock::now();
  double eval_seconds = 0;
  tasks::Rng rng(options.seed);
  std::vector<int> order;
  size_t next = 0;
  for (int step = 0; step < options.steps; ++step) {
    std::fill(grads.begin(), grads.end(), 0.0f);
    double loss = 0;
    for (int b = 0; b < options.batch; ++b) {
      if (next == order.size()) {  // a new epoch in a fresh order
        order.resize(train.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = int(i);
        rng.shuffle(order);
        next = 0;
      }
      std::fill(sample_grads.begin(), sample_grads.end(), 0.0f);
      loss += objective.evaluate(params.data(), train[size_t(order[next++])], sample_grads.data(), pool);
      for (int64_t i = 0; i < n_params; ++i) grads[i] += sample_grads[i] / float(options.batch);
    }
    loss /= options.batch;
    const double norm = train::clip_global_norm(grads.data(), n_params, options.clip, pool);
    const float lr = schedule.at(step);
    adam.update(params.data(), grads.data(), lr, pool);
    if (callbacks.progress)
      callbacks.progress({TrainProgress::Phase::Training, step + 1, options.steps, loss, lr, norm});
    const bool last = step + 1 == options.steps;
    if (last || (options.eval_every > 0 && (step + 1) % options.eval_every == 0)) {
      const auto eval_start = Clock::now();
      const HeldOutMetrics m = heldout_metrics();
      if (last) summary.final = m;
      if (callbacks.heldout) callbacks.heldout(step + 1, m);
      eval_seconds += seconds_since(eval_start);
    }
  }
  summary.train_seconds = seconds_since(t0) - eval_seconds;  // the steps alone

  LookaheadAdapter out = start;
  std::copy(params.begin(), params.begin() + int64_t(out.embd.size()), out.embd.begin());
  std::copy(params.begin() + int64_t(out.embd.size()), params.end(), out.lora.params().begin());
  return out;
}

}  // namespace kvslim
