// Writes a trained model as an inference GGUF (arch llama) that Model::load + Forward::run
// run: the config keys, the tokenizer keys (copied from a tokenizer GGUF, or the built-in byte
// vocabulary), and every parameter under its GGUF name (matrices in F32 or F16; norm weights
// always F32, as the engine reads them).
#pragma once

#include <string>

#include "gguf/gguf.h"
#include "tensor/dtype.h"
#include "train/train_model.h"

namespace kvslim::train {

// Adds the model's keys and tensors to `writer`. Throws if the tokenizer has more tokens than
// the model's vocabulary, or for a type other than F32/F16.
void add_model_to_gguf(gguf::Writer& writer, const TrainModel<float>& model, DType matrix_type,
                       const std::string& vocab_path);

// add_model_to_gguf into a new file, written atomically.
void export_model(const TrainModel<float>& model, DType matrix_type, const std::string& vocab_path,
                  const std::string& out_path);

}  // namespace kvslim::train
