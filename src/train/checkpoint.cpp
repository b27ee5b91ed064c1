#include "train/checkpoint.h"

#include <cstring>

#include "train/export.h"
#include "util/error.h"

namespace kvslim::train {

namespace {

constexpr const char* kRunPrefix = "train.run.";

std::vector<uint8_t> float_bytes(const std::vector<float>& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  return std::vector<uint8_t>(p, p + v.size() * sizeof(float));
}

// Copies an F32 tensor of exactly `n` elements (any shape) into out.
void read_f32(const gguf::File& file, const std::string& name, int64_t n, float* out) {
  const gguf::TensorInfo* t = file.find_tensor(name);
  if (!t) fail("{}: checkpoint tensor '{}' is missing", file.path(), name);
  if (t->type != uint32_t(gguf::TensorType::F32) || t->n_elements != uint64_t(n))
    fail("{}: checkpoint tensor '{}' must be f32 with {} elements, has {} of type {}", file.path(), name, n,
         t->n_elements, gguf::tensor_type_name(t->type));
  std::memcpy(out, file.tensor_data(*t), size_t(n) * sizeof(float));
}

float get_f32(const gguf::File& file, const char* key) { return float(file.get_float(key)); }

}  // namespace

void save_checkpoint(const std::string& path, const TrainModel<float>& model, const AdamW& optimizer,
                     const StepOptions& step_options, uint64_t seed, uint64_t data_position,
                     const std::string& vocab_path, const std::vector<gguf::MetadataEntry>& run_keys) {
  using gguf::Value;
  gguf::Writer w;
  for (const gguf::MetadataEntry& e : run_keys) {
    if (!e.key.starts_with(kRunPrefix)) fail("checkpoint key '{}' does not start with '{}'", e.key, kRunPrefix);
    w.set(e.key, e.value);
  }
  add_model_to_gguf(w, model, DType::F32, vocab_path);
  w.set("train.step", Value::of_u64(uint64_t(optimizer.steps())));
  w.set("train.seed", Value::of_u64(seed));
  w.set("train.data_position", Value::of_u64(data_position));
  w.set("train.tied_output", Value::of_bool(model.tied_output()));
  const AdamWConfig& a = optimizer.config();
  w.set("train.adam.beta1", Value::of_f32(a.beta1));
  w.set("train.adam.beta2", Value::of_f32(a.beta2));
  w.set("train.adam.eps", Value::of_f32(a.eps));
  w.set("train.adam.weight_decay", Value::of_f32(a.weight_decay));
  const LrSchedule& s = step_options.schedule;
  w.set("train.lr", Value::of_f32(s.lr));
  w.set("train.warmup", Value::of_u64(uint64_t(s.warmup)));
  w.set("train.total_steps", Value::of_u64(uint64_t(s.total_steps)));
  w.set("train.min_lr_ratio", Value::of_f32(s.min_ratio));
  Value clip;  // a double: stored exactly, so a resumed run clips exactly as before
  clip.type = gguf::ValueType::FLOAT64;
  clip.f = step_options.clip;
  w.set("train.clip", clip);
  w.set("train.micro_tokens", Value::of_u64(uint64_t(step_options.micro_tokens)));
  w.add_tensor("train.adam_m", ggml_type_id(DType::F32), {optimizer.m().size()}, float_bytes(optimizer.m()));
  w.add_tensor("train.adam_v", ggml_type_id(DType::F32), {optimizer.v().size()}, float_bytes(optimizer.v()));
  w.write(path);
}

Checkpoint load_checkpoint(const std::string& path) {
  const gguf::File file = gguf::File::open(path);
  Checkpoint ck;
  ck.config = ModelConfig::from_gguf(file);
  const gguf::TensorInfo* embd = file.find_tensor("token_embd.weight");
  if (!embd || embd->dims.size() != 2)
    fail("{}: checkpoint tensor 'token_embd.weight' is missing or not a matrix", path);
  ck.config.n_vocab = int(embd->dims[1]);
  ck.tied_output = file.get_bool("train.tied_output");
  ck.step = int64_t(file.get_uint("train.step"));
  ck.seed = file.get_uint("train.seed");
  ck.data_position = file.get_uint("train.data_position");
  ck.adam = AdamWConfig{get_f32(file, "train.adam.beta1"), get_f32(file, "train.adam.beta2"),
                        get_f32(file, "train.adam.eps"), get_f32(file, "train.adam.weight_decay")};
  LrSchedule& s = ck.step_options.schedule;
  s.lr = get_f32(file, "train.lr");
  s.warmup = int64_t(file.get_uint("train.warmup"));
  s.total_steps = int64_t(file.get_uint("train.total_steps"));
  s.min_ratio = get_f32(file, "train.min_lr_ratio");
  ck.step_options.clip = file.get_float("train.clip");
  ck.step_options.micro_tokens = int64_t(file.get_uint("train.micro_tokens"));

  for (const gguf::MetadataEntry& e : file.metadata())
    if (e.key.starts_with(kRunPrefix)) ck.run_keys.push_back(e);

  const ParamLayout layout(training_config(ck.config), ck.tied_output);
  ck.params.resize(size_t(layout.size()));
  for (const ParamTensor& t : layout.tensors()) read_f32(file, t.name, t.size(), ck.params.data() + t.offset);
  ck.adam_m.resize(size_t(layout.size()));
  ck.adam_v.resize(size_t(layout.size()));
  read_f32(file, "train.adam_m", layout.size(), ck.adam_m.data());
  read_f32(file, "train.adam_v", layout.size(), ck.adam_v.data());
  return ck;
}

}  // namespace kvslim::train
