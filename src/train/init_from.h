// Reading a trained model back into the trainer (`train-model --init-from`): its shape and its
// weights, so training can go on with a new schedule, task mix or longer context.
#pragma once

#include <string>

#include "model/config.h"
#include "train/train_model.h"

namespace kvslim::train {

// The model's architecture from its GGUF (llama only); tied_output is set from whether the
// file has a separate output matrix.
ModelConfig read_model_shape(const std::string& path, bool& tied_output);

// Copies every parameter of model's layout from the file, converted to f32. Throws naming the
// tensor that is missing or whose size differs.
void load_model_params(const std::string& path, TrainModel<float>& model);

}  // namespace kvslim::train
