// Training checkpoints: one GGUF file holding everything needed to continue to the identical
// next step. It is also a loadable F32 inference model (config, tokenizer and parameter tensors
// under their GGUF names), plus the Adam moments (tensors train.adam_m / train.adam_v, flat in
// the parameter layout's order), the step, the seed, the data-stream position and the
// hyper-parameters (train.* keys). Written atomically (temp file + rename) by gguf::Writer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/config.h"
#include "train/adamw.h"
#include "train/train_model.h"
#include "train/train_step.h"

namespace kvslim::train {

struct Checkpoint {
  ModelConfig config;
  bool tied_output = false;
  AdamWConfig adam;
  StepOptions step_options;
  uint64_t seed = 0;
  uint64_t data_position = 0;  // samples the data stream has handed out
  int64_t step = 0;            // updates done
  std::vector<float> params, adam_m, adam_v;
  // The caller's own keys (the trainer's data and curriculum settings), all "train.run.*".
  std::vector<gguf::MetadataEntry> run_keys;
};

// vocab_path: the tokenizer GGUF whose keys the checkpoint carries (empty: byte vocabulary).
// run_keys must all start with "train.run." (throws otherwise).
void save_checkpoint(const std::string& path, const TrainModel<float>& model, const AdamW& optimizer,
                     const StepOptions& step_options, uint64_t seed, uint64_t data_position,
                     const std::string& vocab_path, const std::vector<gguf::MetadataEntry>& run_keys = {});

// Throws naming the file and the missing or inconsistent key or tensor.
Checkpoint load_checkpoint(const std::string& path);

}  // namespace kvslim::train
