#include "train/export.h"

#include "model/random_model.h"
#include "util/error.h"

namespace kvslim::train {

void add_model_to_gguf(gguf::Writer& w, const TrainModel<float>& model, DType matrix_type,
                       const std::string& vocab_path) {
  if (matrix_type != DType::F32 && matrix_type != DType::F16)
    fail("trained models are written in f32 or f16, not {}", dtype_name(matrix_type));
  const ModelConfig& c = model.config();
  const int n_tokens = copy_vocab(vocab_path, w);
  if (n_tokens > c.n_vocab)
    fail("the tokenizer{} has {} tokens but the model only {} embedding rows",
         vocab_path.empty() ? "" : " of " + vocab_path, n_tokens, c.n_vocab);
  c.to_gguf(w);
  w.set("general.name", gguf::Value::of_string("kvslim trained model"));
  for (const ParamTensor& t : model.layout().tensors()) {
    const float* p = model.params().data() + t.offset;
    const bool matrix = t.rows > 1;
    const DType type = matrix ? matrix_type : DType::F32;
    std::vector<uint8_t> bytes(row_bytes(type, t.cols) * t.rows);
    convert_from_f32(p, type, bytes.data(), t.size());
    std::vector<uint64_t> dims =
        matrix ? std::vector<uint64_t>{uint64_t(t.cols), uint64_t(t.rows)} : std::vector<uint64_t>{uint64_t(t.cols)};
    w.add_tensor(t.name, ggml_type_id(type), std::move(dims), std::move(bytes));
  }
}

void export_model(const TrainModel<float>& model, DType matrix_type, const std::string& vocab_path,
                  const std::string& out_path) {
  gguf::Writer w;
  add_model_to_gguf(w, model, matrix_type, vocab_path);
  w.write(out_path);
}

}  // namespace kvslim::train
