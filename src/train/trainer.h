// The training run behind `kvslim train-model`: a llama model trained from scratch on the
// evaluation generators' stream (data_stream.h) with a short-to-long length curriculum,
// batches of about batch_tokens tokens, AdamW with warmup + cosine decay and clipping,
// periodic checkpoints (resumable to the identical next step), periodic held-out evaluation of
// the exported model, and the exported GGUF at every checkpoint, evaluation and at the end.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/config.h"
#include "tensor/dtype.h"
#include "tokenizer/tokenizer.h"
#include "train/adamw.h"
#include "train/curriculum.h"
#include "train/data_stream.h"
#include "train/heldout_eval.h"
#include "train/train_model.h"
#include "train/train_step.h"
#include "util/thread_pool.h"

namespace kvslim::train {

struct TrainerOptions {
  // The model. n_vocab comes from the tokenizer; arch is llama.
  ModelConfig model;
  bool tied_output = true;
  std::string vocab_path;  // tokenizer GGUF; empty: the built-in byte vocabulary
  // Optimisation. step.schedule.total_steps is the number of updates.
  AdamWConfig adam;
  StepOptions step;
  int64_t batch_tokens = 4096;
  uint64_t seed = 1;  // initialisation and data order
  // Data.
  // The induction task first (alone at 128 tokens, where no evaluation task fits), then the
  // retrieval tasks, weighted towards the three the project's model must solve.
  std::string tasks =
      "induction,passkey:3,niah_single_1:3,niah_single_2:3,niah_single_3,niah_multikey_1,"
      "niah_multikey_2,niah_multikey_3,niah_multivalue,niah_multiquery,vt,cwe:0.5,fwe:0.5";
  std::string curriculum = "128:700,256:300,512:600,1024:800,2048";
  float prompt_weight = 0.05f;
  // Files.
  std::string out_path;  // the exported model
  DType out_type = DType::F16;
  std::string checkpoint_path;   // empty: no checkpoints
  int64_t checkpoint_every = 0;  // steps; 0: only at the end
  bool resume = false;           // continue from checkpoint_path when it exists
  // Start from a trained model's weights and tokenizer instead of a random initialisation (a
  // fresh optimiser and schedule): its architecture replaces `model` except context_length,
  // which may grow so the model learns longer prompts. A checkpoint being resumed wins.
  std::string init_from;
  // Blocks added to the init_from model (0: its shape as it is); see grown_layer_sources.
  int grow_layers = 0;
  // Held-out evaluation of the exported model every eval_every steps (0: never) and at the end
  // when eval_every > 0.
  int64_t eval_every = 0;
  EvalSpec eval;

  void validate() const;  // throws naming the bad option
};

struct StepReport {
  int64_t step = 0;  // updates done, including this one
  int64_t total_steps = 0;
  int64_t length = 0;  // the curriculum's prompt length for this step
  int sequences = 0;
  StepStats stats;
  double seconds = 0;  // wall time of this step
};

struct TrainerEvents {
  std::function<void(const StepReport&)> on_step;
  std::function<void(int64_t step, const std::vector<EvalScore>&)> on_eval;
  std::function<void(const std::string&)> on_note;  // files written, resume
};

class Trainer {
 public:
  // Builds a fresh model, or with options.resume loads options.checkpoint_path when it exists;
  // a resumed run takes every setting that defines the run (model, optimiser, schedule, steps,
  // batch, seed, tasks, curriculum, prompt weight, tokenizer) from the checkpoint.
  Trainer(const TrainerOptions& options, ThreadPool& pool);
  ~Trainer();

  // Trains until the last step; returns early (after a checkpoint) when should_stop() says so.
  void run(const TrainerEvents& events, const std::function<bool()>& should_stop = {});

  const TrainerOptions& options() const { return options_; }
  bool resumed() const { return resumed_; }
  int64_t step() const { return optimizer_->steps(); }
  const TrainModel<float>& model() const { return *model_; }

 private:
  void save_checkpoint_now(const TrainerEvents& events);
  void export_now(const TrainerEvents& events);
  void evaluate_now(const TrainerEvents& events);

  TrainerOptions options_;
  ThreadPool& pool_;
  bool resumed_ = false;
  int init_from_layers_ = 0;  // blocks in the --init-from file
  std::string vocab_source_;  // where the tokenizer keys are copied from ("" = byte vocabulary)
  Curriculum curriculum_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<TrainModel<float>> model_;
  std::unique_ptr<AdamW> optimizer_;
  std::unique_ptr<DataStream> data_;
};

}  // namespace kvslim::train
