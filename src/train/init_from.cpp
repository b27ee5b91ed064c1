#include "train/init_from.h"

#include <algorithm>

#include <fmt/format.h>

#include "gguf/gguf.h"
#include "model/quantize_preset.h"
#include "tensor/dtype.h"
#include "util/error.h"

namespace kvslim::train {

ModelConfig read_model_shape(const std::string& path, bool& tied_output) {
  const gguf::File file = gguf::File::open(path);
  ModelConfig config = ModelConfig::from_gguf(file);
  if (config.arch != Arch::Llama) fail("{}: --init-from needs a llama model (the trainer's architecture)", path);
  const gguf::TensorInfo* embd = file.find_tensor("token_embd.weight");
  if (!embd || embd->dims.size() != 2) fail("{}: tensor 'token_embd.weight' is missing or not a matrix", path);
  config.n_vocab = int(embd->dims[1]);
  tied_output = file.find_tensor("output.weight") == nullptr;
  return config;
}

std::vector<int> grown_layer_sources(int from_layers, int to_layers) {
  if (from_layers < 1 || to_layers < from_layers)
    fail("cannot grow a model of {} blocks to {} blocks", from_layers, to_layers);
  const int added = to_layers - from_layers;
  std::vector<int> sources;
  for (int l = 0; l < from_layers; ++l) {
    sources.push_back(l);
    // Up to file block l, (l + 1) * added / from_layers new blocks in all, rounded down.
    const int after = (l + 1) * added / from_layers - l * added / from_layers;
    sources.insert(sources.end(), size_t(after), -1);
  }
  return sources;
}

void load_model_params(const std::string& path, TrainModel<float>& model, int file_layers) {
  const gguf::File file = gguf::File::open(path);
  const std::vector<int> sources = grown_layer_sources(file_layers, model.config().n_layers);
  const ParamLayout& layout = model.layout();
  for (const ParamTensor& t : layout.tensors()) {
    float* dst = model.params().data() + t.offset;
    std::string name = t.name;
    if (const int block = tensor_layer(t.name); block >= 0) {
      const int source = sources[size_t(block)];
      if (source < 0) {  // a new block: the identity until trained
        const ParamLayout::Layer& L = layout.layers()[size_t(block)];
        if (t.offset == L.wo || t.offset == L.w_down) std::fill_n(dst, t.size(), 0.0f);
        continue;
      }
      name = fmt::format("blk.{}.{}", source, t.name.substr(t.name.find('.', 4) + 1));  // the rest after "blk.N."
    }
    const gguf::TensorInfo* info = file.find_tensor(name);
    if (!info) fail("{}: tensor '{}' is missing", path, name);
    if (info->n_elements != uint64_t(t.size()))
      fail("{}: tensor '{}' has {} values, the model being trained needs {}", path, name, info->n_elements, t.size());
    convert_to_f32(dtype_from_ggml(info->type), file.tensor_data(*info), dst, t.size());
  }
}

}  // namespace kvslim::train
