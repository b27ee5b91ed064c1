// The trainable model end to end: whole-model gradients against finite differences (double),
// the exported GGUF against the trainer's own forward, a tiny run that learns a toy task,
// checkpoint resume bit for bit, and the optimiser pieces against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kv/paged_cache.h"
#include "model/forward.h"
#include "model/model.h"
#include "test_models.h"
#include "train/adamw.h"
#include "train/checkpoint.h"
#include "train/export.h"
#include "train/lr_schedule.h"
#include "train/train_model.h"
#include "train/train_step.h"
#include "util/error.h"

namespace kvslim::train {
namespace {

ModelConfig tiny_config(int vocab, int ctx = 32) {
  ModelConfig c;
  c.n_layers = 2;
  c.dim = 16;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_dim = 24;
  c.n_vocab = vocab;
  c.context_length = ctx;
  c.rope_base = 100.0f;
  return c;
}

// Parameters far from the (tiny) initial scale, so every path carries signal.
// The built-in byte vocabulary's size: exported models carry that tokenizer.
int byte_vocab_size() {
  gguf::Writer w;
  return add_byte_vocab(w);
}

template <class T>
void randomize(TrainModel<T>& model, uint64_t seed, double spread) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, spread);
  for (const ParamTensor& t : model.layout().tensors())
    for (int64_t i = 0; i < t.size(); ++i) model.params()[t.offset + i] = T((t.rows == 1 ? 1.0 : 0.0) + normal(rng));
}

TrainSequence sequence(std::vector<int32_t> tokens, float weight = 1.0f) {
  TrainSequence s;
  s.weights.assign(tokens.size(), weight);
  s.tokens = std::move(tokens);
  return s;
}

void check_model_gradient(bool tied) {
  ThreadPool pool(2);
  TrainModel<double> model(tiny_config(11), tied);
  randomize(model, tied ? 1 : 2, 0.3);
  std::vector<TrainSequence> batch = {sequence({1, 5, 9, 3, 3, 10, 0}), sequence({4, 2, 7, 7, 1})};
  batch[0].weights = {0, 1, 0.5f, 1, 0, 2, 1};  // weights differ per token, one is 0
  const double scale = 0.37;
  model.zero_grads();
  model.forward(batch, pool);
  model.backward(scale, pool);
  const std::vector<double> analytic = model.grads();

  // Every parameter, by central differences.
  std::vector<double>& p = model.params();
  double err = 0, norm = 0;
  const double h = 1e-5;
  for (size_t i = 0; i < p.size(); ++i) {
    const double p0 = p[i];
    p[i] = p0 + h;
    const double up = scale * model.forward(batch, pool);
    p[i] = p0 - h;
    const double down = scale * model.forward(batch, pool);
    p[i] = p0;
    const double numeric = (up - down) / (2 * h);
    err = std::max(err, std::abs(numeric - analytic[i]));
    norm = std::max(norm, std::abs(numeric));
  }
  EXPECT_GT(norm, 1e-3);
  EXPECT_LT(err / norm, 1e-6) << (tied ? "tied" : "untied");
}

TEST(TrainModel, GradientMatchesFiniteDifferencesUntied) { check_model_gradient(false); }
TEST(TrainModel, GradientMatchesFiniteDifferencesTied) { check_model_gradient(true); }

TEST(TrainModel, LayoutNamesAndDecay) {
  const TrainModel<float> untied(tiny_config(11), false), tied(tiny_config(11), true);
  EXPECT_EQ(untied.layout().size() - tied.layout().size(), 11 * 16);  // output.weight
  EXPECT_EQ(tied.layout().output(), tied.layout().token_embd());
  EXPECT_TRUE(untied.layout().find("blk.1.ffn_down.weight").decay);
  EXPECT_FALSE(untied.layout().find("blk.0.attn_norm.weight").decay);
  EXPECT_FALSE(untied.layout().find("token_embd.weight").decay);
  EXPECT_EQ(untied.layout().find("blk.0.attn_k.weight").rows, 8);  // 2 KV heads of 4
  EXPECT_THROW(tied.layout().find("output.weight"), Error);
}

TEST(TrainModel, RejectsBadConfigAndBatch) {
  ModelConfig c = tiny_config(11);
  c.n_kv_heads = 3;
  EXPECT_THROW(TrainModel<float>(c, false), Error);
  c = tiny_config(11);
  c.arch = Arch::Qwen2;
  EXPECT_THROW(TrainModel<float>(c, false), Error);

  ThreadPool pool(1);
  TrainModel<float> model(tiny_config(11, 4), false);
  EXPECT_THROW(model.forward({sequence({3})}, pool), Error);                 // nothing to predict
  EXPECT_THROW(model.forward({sequence({1, 11})}, pool), Error);             // outside the vocabulary
  EXPECT_THROW(model.forward({sequence({1, 2, 3, 4, 5, 6})}, pool), Error);  // beyond the context
  TrainSequence s = sequence({1, 2, 3});
  s.weights.pop_back();
  EXPECT_THROW(model.forward({s}, pool), Error);
  EXPECT_THROW(model.backward(1.0f, pool), Error);  // no successful forward before it
}

// All logits of `tokens` from the inference engine on the exported file.
std::vector<float> engine_logits(const std::string& path, const std::vector<int32_t>& tokens) {
  const auto model = Model::load(path);
  ThreadPool pool(2);
  PagedKvCache cache(kv_shape(model->config()), int64_t(tokens.size()));
  Forward forward(*model, int(tokens.size()));
  const float* logits = forward.run(tokens.data(), int(tokens.size()), 0, cache, pool, true);
  return std::vector<float>(logits, logits + tokens.size() * size_t(model->config().n_vocab));
}

void check_export(bool tied, DType type, double tolerance) {
  ThreadPool pool(2);
  ModelConfig c = tiny_config(byte_vocab_size(), 64);
  c.dim = 32;
  TrainModel<float> model(c, tied);
  randomize(model, 3, 0.15);
  std::vector<int32_t> tokens(40);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 97 + 5) % c.n_vocab);
  std::vector<int32_t> with_next = tokens;
  with_next.push_back(0);  // the trainer predicts token t+1 from 0..t: feed one more
  const std::vector<float> want = model.forward_logits({sequence(with_next)}, pool);

  const std::string path = kvslim::testing::temp_path(fmt::format("trained-{}-{}.gguf", tied, dtype_name(type)));
  export_model(model, type, "", path);
  const std::vector<float> got = engine_logits(path, tokens);
  ASSERT_EQ(got.size(), want.size());
  double err = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, double(std::abs(got[i] - want[i])));
    scale = std::max(scale, double(std::abs(want[i])));
  }
  EXPECT_GT(scale, 0.5);
  EXPECT_LT(err / scale, tolerance) << dtype_name(type) << (tied ? " tied" : " untied");
}

TEST(TrainModel, ExportedF32ModelReproducesTrainerLogits) {
  check_export(false, DType::F32, 1e-4);
  check_export(true, DType::F32, 1e-4);
}

TEST(TrainModel, ExportedF16ModelIsCloseToTrainerLogits) { check_export(false, DType::F16, 1e-2); }

TEST(TrainModel, ExportRejectsVocabularyLargerThanModel) {
  TrainModel<float> model(tiny_config(11), false);
  EXPECT_THROW(export_model(model, DType::F32, "", kvslim::testing::temp_path("too-small.gguf")), Error);
  EXPECT_THROW(export_model(model, DType::Q8_0, "", kvslim::testing::temp_path("q8.gguf")), Error);
}

// ---- optimiser pieces ----

TEST(TrainOptimizer, LrScheduleByHand) {
  const LrSchedule s{1.0f, 4, 14, 0.1f};
  EXPECT_FLOAT_EQ(s.at(0), 0.25f);
  EXPECT_FLOAT_EQ(s.at(3), 1.0f);
  EXPECT_FLOAT_EQ(s.at(4), 1.0f);               // cosine starts at the peak
  EXPECT_NEAR(s.at(9), 0.1 + 0.9 * 0.5, 1e-6);  // halfway: cos(pi/2) = 0
  EXPECT_NEAR(s.at(14), 0.1, 1e-6);             // the floor
  EXPECT_NEAR(s.at(100), 0.1, 1e-6);
  EXPECT_THROW((LrSchedule{0.0f, 0, 1, 0.1f}.validate()), Error);
  EXPECT_THROW((LrSchedule{1.0f, 0, 1, 2.0f}.validate()), Error);
}

TEST(TrainOptimizer, ClipGlobalNorm) {
  ThreadPool pool(2);
  std::vector<float> g = {3, 0, 4};
  EXPECT_DOUBLE_EQ(clip_global_norm(g.data(), 3, 10.0, pool), 5.0);  // under the limit: unchanged
  EXPECT_FLOAT_EQ(g[0], 3.0f);
  EXPECT_DOUBLE_EQ(clip_global_norm(g.data(), 3, 1.0, pool), 5.0);
  EXPECT_FLOAT_EQ(g[0], 0.6f);
  EXPECT_FLOAT_EQ(g[2], 0.8f);
}

TEST(TrainOptimizer, AdamWStepsByHand) {
  ThreadPool pool(1);
  const TrainModel<float> model(tiny_config(11), false);
  const ParamLayout& layout = model.layout();
  AdamW opt(layout, AdamWConfig{0.9f, 0.99f, 1e-8f, 0.5f});
  std::vector<float> p(size_t(layout.size()), 2.0f), g(p.size(), 0.0f);
  const int64_t wq = layout.find("blk.0.attn_q.weight").offset;
  const int64_t norm = layout.find("blk.0.attn_norm.weight").offset;
  g[wq] = -0.3f;
  g[norm] = 0.3f;
  // Step 1: bias-corrected m = g, v = g^2, so the Adam step is lr * sign(g).
  opt.update(p.data(), g.data(), 0.1f, pool);
  EXPECT_NEAR(p[wq], 2.0 + 0.1 - 0.1 * 0.5 * 2.0, 1e-6);  // decayed matrix
  EXPECT_NEAR(p[norm], 2.0 - 0.1, 1e-6);                  // norm weight: no decay
  EXPECT_NEAR(p[norm + 1], 2.0, 1e-7);                    // zero gradient, no decay: still
  // Step 2 with g = 0: m = 0.9 * 0.3 * 0.1... bias-corrected by 1 - 0.9^2 and 1 - 0.99^2.
  g[norm] = 0.0f;
  const double m = 0.9 * 0.1 * 0.3, v = 0.99 * 0.01 * 0.09;
  const double want = (2.0 - 0.1) - 0.1 * (m / (1 - 0.81)) / (std::sqrt(v / (1 - 0.9801)) + 1e-8);
  opt.update(p.data(), g.data(), 0.1f, pool);
  EXPECT_NEAR(p[norm], want, 1e-6);
  EXPECT_EQ(opt.steps(), 2);
}

// ---- training ----

// Copy task: k random symbols, a separator, the same k symbols again; loss only on the copy.
// Predicting the second half needs attention to the first (an induction-style lookup).
std::vector<TrainSequence> copy_batch(uint64_t seed, int n_seqs, int k, int n_symbols) {
  std::mt19937_64 rng(seed);
  std::vector<TrainSequence> batch;
  for (int s = 0; s < n_seqs; ++s) {
    TrainSequence seq;
    std::vector<int32_t> half(k);
    for (auto& t : half) t = int32_t(1 + rng() % n_symbols);
    seq.tokens.push_back(0);
    seq.tokens.insert(seq.tokens.end(), half.begin(), half.end());
    seq.tokens.push_back(n_symbols + 1);
    seq.tokens.insert(seq.tokens.end(), half.begin(), half.end());
    seq.weights.assign(seq.tokens.size(), 0.0f);
    for (int i = 0; i < k; ++i) seq.weights[k + 2 + i] = 1.0f;
    batch.push_back(std::move(seq));
  }
  return batch;
}

TEST(TrainModel, LearnsToCopyASequence) {
  ThreadPool pool(2);
  const int k = 6, symbols = 8;
  ModelConfig c = tiny_config(symbols + 2, 16);
  c.dim = 32;
  c.ffn_dim = 64;
  TrainModel<float> model(c, true);
  model.init_params(5);
  AdamW opt(model.layout(), AdamWConfig{});
  StepOptions options;
  options.schedule = LrSchedule{1e-2f, 20, 120, 0.1f};
  double first = 0, last = 0;
  for (int step = 0; step < 120; ++step) {
    const StepStats st = train_step(model, opt, copy_batch(1000 + step, 16, k, symbols), options, pool);
    if (step == 0) first = st.loss;
    last = st.loss;
  }
  // Chance is log(8) = 2.08 nats per copied symbol; a model that copies gets near 0.
  EXPECT_GT(first, 1.8);
  EXPECT_LT(last, 0.05);
}

TEST(TrainModel, MicroBatchesGiveTheGradientOfTheWholeBatch) {
  ThreadPool pool(2);
  TrainModel<float> model(tiny_config(10, 16), false);
  randomize(model, 9, 0.2);
  const auto batch = copy_batch(7, 6, 5, 8);
  ASSERT_EQ(micro_batches(batch, 25).size(), 3u);  // 12 inputs per sequence: 2 per micro-batch
  StepOptions whole, split;
  whole.micro_tokens = 1000;
  split.micro_tokens = 25;
  AdamW opt1(model.layout(), AdamWConfig{}), opt2(model.layout(), AdamWConfig{});
  const std::vector<float> p0 = model.params();
  const StepStats a = train_step(model, opt1, batch, whole, pool);
  const std::vector<float> g1 = model.grads();
  model.params() = p0;
  const StepStats b = train_step(model, opt2, batch, split, pool);
  EXPECT_NEAR(a.loss, b.loss, 1e-5 * a.loss);
  // Weights are 0 or 1 here, so the loss is the mean nll of the weight-1 tokens.
  EXPECT_EQ(a.answer_tokens, 30);
  EXPECT_NEAR(a.answer_loss, a.loss, 1e-9 * a.loss);
  EXPECT_DOUBLE_EQ(a.weight, 30.0);
  double err = 0, scale = 0;
  for (size_t i = 0; i < g1.size(); ++i) {
    err = std::max(err, double(std::abs(g1[i] - model.grads()[i])));
    scale = std::max(scale, double(std::abs(g1[i])));
  }
  EXPECT_LT(err / scale, 1e-5);
}

TEST(TrainModel, TrainStepRejectsBatchWithoutLossWeight) {
  ThreadPool pool(1);
  TrainModel<float> model(tiny_config(10, 16), false);
  AdamW opt(model.layout(), AdamWConfig{});
  EXPECT_THROW(train_step(model, opt, {sequence({1, 2, 3}, 0.0f)}, StepOptions{}, pool), Error);
}

// n steps of the copy task from a fresh model, or resumed from a checkpoint after `split`.
struct TrainedState {
  std::vector<float> params, m, v;
};

TrainedState train_copy(int n_steps, int split, const std::string& checkpoint) {
  ThreadPool pool(2);
  const uint64_t seed = 42;
  StepOptions options;
  options.schedule = LrSchedule{3e-3f, 2, n_steps, 0.1f};
  options.micro_tokens = 30;
  options.clip = 0.3;                                  // not a float: must survive the checkpoint exactly
  ModelConfig c = tiny_config(byte_vocab_size(), 16);  // the checkpoint carries the byte vocabulary
  auto model = std::make_unique<TrainModel<float>>(c, false);
  model->init_params(seed);
  auto opt = std::make_unique<AdamW>(model->layout(), AdamWConfig{});
  uint64_t position = 0;  // the data stream: batch i is copy_batch(seed + i)
  for (int step = 0; step < n_steps; ++step) {
    if (step == split) {
      save_checkpoint(checkpoint, *model, *opt, options, seed, position, "");
      const Checkpoint ck = load_checkpoint(checkpoint);
      EXPECT_EQ(ck.step, split);
      EXPECT_EQ(ck.seed, seed);
      model = std::make_unique<TrainModel<float>>(ck.config, ck.tied_output);
      model->params() = ck.params;
      opt = std::make_unique<AdamW>(model->layout(), ck.adam);
      opt->restore(ck.adam_m, ck.adam_v, ck.step);
      options = ck.step_options;
      position = ck.data_position;
    }
    train_step(*model, *opt, copy_batch(seed + position, 4, 5, 8), options, pool);
    ++position;
  }
  return TrainedState{model->params(), opt->m(), opt->v()};
}

TEST(TrainModel, ResumeFromCheckpointEqualsUninterruptedTraining) {
  const std::string path = kvslim::testing::temp_path("resume.ckpt.gguf");
  const TrainedState straight = train_copy(8, -1, path);
  const TrainedState resumed = train_copy(8, 3, path);
  ASSERT_EQ(straight.params.size(), resumed.params.size());
  EXPECT_EQ(std::memcmp(straight.params.data(), resumed.params.data(), straight.params.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(straight.m.data(), resumed.m.data(), straight.m.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(straight.v.data(), resumed.v.data(), straight.v.size() * sizeof(float)), 0);
  // The checkpoint is itself a loadable inference model.
  EXPECT_NO_THROW(Model::load(path));
}

TEST(TrainModel, CheckpointLoadNamesWhatIsMissing) {
  const std::string model_path = kvslim::testing::make_model(kvslim::testing::TinyModel{});
  try {
    load_checkpoint(model_path);
    FAIL() << "a plain model is not a checkpoint";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train."), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_checkpoint(kvslim::testing::temp_path("no-such-checkpoint.gguf")), Error);
}

}  // namespace
}  // namespace kvslim::train
