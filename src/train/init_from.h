// Reading a trained model back into the trainer (`train-model --init-from`): its shape and its
// weights, so training can go on with a new schedule, task mix or longer context, optionally
// with more blocks (`--grow-layers`).
#pragma once

#include <string>
#include <vector>

#include "model/config.h"
#include "train/train_model.h"

namespace kvslim::train {

// The model's architecture from its GGUF (llama only); tied_output is set from whether the
// file has a separate output matrix.
ModelConfig read_model_shape(const std::string& path, bool& tied_output);

// Where each block of a model grown from `from_layers` to `to_layers` blocks comes from: the
// file's block index, or -1 for a new block. The new blocks are spread evenly, each placed after
// a file block (4 -> 6: 0 1 new 2 3 new), so every stage of the network gains depth, not only the top.
std::vector<int> grown_layer_sources(int from_layers, int to_layers);

// Copies every parameter of model's layout from the file (which has `file_layers` blocks,
// at most the model's), converted to f32. Blocks the file lacks (grown_layer_sources) keep
// model's initialisation except their attention output and ffn_down matrices, which are zeroed:
// such a block adds nothing to the residual stream, so the grown model computes exactly what the
// file's does, and training moves it from there (the zeroed matrices still get gradients).
// Throws naming the tensor that is missing or whose size differs.
void load_model_params(const std::string& path, TrainModel<float>& model, int file_layers);

}  // namespace kvslim::train
