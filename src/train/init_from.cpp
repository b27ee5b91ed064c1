#include "train/init_from.h"

#include "gguf/gguf.h"
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

void load_model_params(const std::string& path, TrainModel<float>& model) {
  const gguf::File file = gguf::File::open(path);
  for (const ParamTensor& t : model.layout().tensors()) {
    const gguf::TensorInfo* info = file.find_tensor(t.name);
    if (!info) fail("{}: tensor '{}' is missing", path, t.name);
    if (info->n_elements != uint64_t(t.size()))
      fail("{}: tensor '{}' has {} values, the model being trained needs {}", path, t.name, info->n_elements,
           t.size());
    convert_to_f32(dtype_from_ggml(info->type), file.tensor_data(*info), model.params().data() + t.offset, t.size());
  }
}

}  // namespace kvslim::train
