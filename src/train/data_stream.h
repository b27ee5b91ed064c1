// The training data: an endless, seeded stream of samples from the evaluation generators
// (src/tasks/task.h), each turned into prompt + answer(s) + EOS with the loss on the answer and
// EOS (weight 1) and, lightly, on the prompt (prompt_weight), so the model learns to retrieve
// rather than to model the haystack.
//
// Seed split: training samples use generator seeds >= kFirstTrainingSeed (10^6); held-out
// evaluation uses seeds below it, so no evaluated sample is ever trained on.
//
// Sample number i is a pure function of (stream seed, i, stage length): the stream's whole
// state is its position, which a checkpoint stores.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tasks/task.h"
#include "tokenizer/tokenizer.h"
#include "train/train_model.h"

namespace kvslim::train {

inline constexpr uint64_t kFirstTrainingSeed = 1'000'000;

// A training-only task besides the evaluation ones: random tokens, then the same tokens again
// until the length is reached, with the loss on the repeats only. Every repeated token can be
// predicted only by finding its earlier occurrence, which is what retrieval needs (an induction
// head); mixed in early, it gives that circuit a dense signal the tasks' few answer tokens lack.
inline constexpr const char* kInductionTask = "induction";
inline constexpr int64_t kInductionMinTokens = 32;

// The tokenizer of a vocab GGUF, or of the built-in byte vocabulary when the path is empty
// (written to a temporary file and removed once read: tokenizers are built from GGUF files).
Tokenizer load_tokenizer(const std::string& vocab_path);

// The shortest prompt a task of the mix can be built at (eval tasks: their minimum). Besides
// the eval tasks and `induction`, the mix takes the dense retrieval tasks of dense_tasks.h.
int64_t task_min_tokens(const std::string& task);

// The induction sequence of `length` tokens (BOS first when the tokenizer adds one): a pattern
// of random non-special tokens, its length uniform in [8, length / 2], repeated to the length.
TrainSequence induction_sequence(uint64_t seed, int64_t length, const Tokenizer& tokenizer);

struct TaskWeight {
  std::string task;
  double weight = 1;
};

// "niah_single_1:3,passkey:2,induction" (weight 1 when omitted). Throws naming an unknown task
// or a weight that is not positive.
std::vector<TaskWeight> parse_task_mix(const std::string& spec);
std::string task_mix_to_string(const std::vector<TaskWeight>& mix);

// The training sequence of a sample: BOS (when the tokenizer adds one) + prompt, then the
// answers joined by ", " (after a space unless the prompt ends in whitespace), then EOS.
// The prompt's tokens are always encode(prompt), the engine's input at evaluation. Throws if
// the tokenizer has no EOS token.
TrainSequence training_sequence(const tasks::TaskSample& sample, const Tokenizer& tokenizer, float prompt_weight);

class DataStream {
 public:
  // context_length: the longest sequence the model takes (prompt + answer + EOS - 1).
  DataStream(const Tokenizer& tokenizer, std::vector<TaskWeight> mix, float prompt_weight, uint64_t seed,
             int64_t context_length);

  // What sample `index` is for a stage of maximum prompt length `length`: a task drawn by
  // weight among those that fit `length`, a prompt length uniform in
  // [max(task minimum, length / 2), length], a generator seed >= kFirstTrainingSeed.
  struct SampleSpec {
    std::string task;
    int64_t target_tokens = 0;
    uint64_t seed = 0;
  };
  SampleSpec spec(uint64_t index, int64_t length) const;
  // The sample itself. Throws if it does not fit the context.
  TrainSequence sample(uint64_t index, int64_t length) const;

  // The text of sample `index` (prompt, then the answers), for training a tokenizer on what the
  // model will read; "" for an induction sample (random tokens, no text).
  std::string sample_text(uint64_t index, int64_t length) const;

  // Samples from position() on until their input tokens reach batch_tokens (at least one);
  // advances the position past them.
  std::vector<TrainSequence> next_batch(int64_t length, int64_t batch_tokens);

  uint64_t position() const { return position_; }
  void set_position(uint64_t position) { position_ = position; }

 private:
  const Tokenizer& tokenizer_;
  std::vector<TaskWeight> mix_;
  float prompt_weight_;
  uint64_t seed_;
  int64_t context_length_;
  uint64_t position_ = 0;
};

}  // namespace kvslim::train
