#include "model/gemma3_config.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "model/config.h"
#include "util/error.h"

namespace kvslim {

namespace {

// llama.cpp's default when the file stores no pattern (the converter's files never do).
constexpr int kDefaultPeriod = 6;

}  // namespace

std::vector<bool> local_layers(const gguf::File& file, const std::string& key, int n_layers, int default_period) {
  std::vector<bool> local(size_t(n_layers), false);
  const gguf::Value* value = file.find(key);
  if (value == nullptr || value->type != gguf::ValueType::ARRAY) {
    const uint64_t period = value ? file.get_uint(key) : uint64_t(default_period);
    if (period > uint64_t(n_layers) * 2 + kDefaultPeriod)
      fail("{}: metadata '{}' = {} is not a layer period for {} layers", file.path(), key, period, n_layers);
    for (int l = 0; l < n_layers; ++l) local[size_t(l)] = gemma3_layer_is_local(l, int(period));
    return local;
  }
  if (value->array.size() != size_t(n_layers))
    fail("{}: metadata '{}' has {} entries but the model has {} layers (block_count)", file.path(), key,
         value->array.size(), n_layers);
  if (value->array_type != gguf::ValueType::BOOL)
    fail("{}: metadata '{}' must be a period or an array of bool (one per layer)", file.path(), key);
  for (int l = 0; l < n_layers; ++l) local[size_t(l)] = value->array[size_t(l)].u != 0;
  return local;
}

bool gemma3_layer_is_local(int layer, int period) { return period == 0 || layer % period < period - 1; }

void read_gemma3_config(const gguf::File& file, ModelConfig& c) {
  const std::string p = "gemma3.";
  // Without a window llama.cpp runs every layer as global (its graph<false>); so do we.
  const uint64_t window = file.get_uint_opt(p + "attention.sliding_window").value_or(0);
  if (window > uint64_t(c.context_length))
    fail("{}: metadata 'gemma3.attention.sliding_window' = {} is larger than the context length {}", file.path(),
         window, c.context_length);
  c.layer_window.clear();
  if (window > 0) {
    const std::vector<bool> local =
        local_layers(file, p + "attention.sliding_window_pattern", c.n_layers, kDefaultPeriod);
    for (int l = 0; l < c.n_layers; ++l) c.layer_window.push_back(local[size_t(l)] ? int(window) : 0);
    c.rope_base_local = float(file.get_float_opt(p + "rope.freq_base_swa").value_or(10000.0));
    if (!(c.rope_base_local > 0)) fail("{}: metadata 'gemma3.rope.freq_base_swa' must be positive", file.path());
  }

  // llama.cpp reads rope.scaling.factor (else rope.scale_linear) as a linear factor for the
  // global layers, unless the scaling type is none; the local layers are never scaled.
  const std::string scaling = file.get_string_opt(p + "rope.scaling.type").value_or("linear");
  if (scaling != "none" && scaling != "linear")
    fail("{}: unsupported 'gemma3.rope.scaling.type' '{}' (supported: none, linear)", file.path(), scaling);
  std::optional<double> factor = file.get_float_opt(p + "rope.scaling.factor");
  if (!factor) factor = file.get_float_opt(p + "rope.scale_linear");
  if (factor && !(*factor >= 0))
    fail("{}: metadata 'gemma3.rope.scaling.factor' = {} must be positive", file.path(), *factor);
  c.rope_freq_scale = (scaling == "none" || !factor || *factor == 0) ? 1.0f : float(1.0 / *factor);

  // As llama.cpp (after gemma_pytorch): 1/sqrt(head size), except the 27B model (62 layers),
  // whose queries are scaled by 1/sqrt(embedding_length / head_count).
  c.attention_scale =
      c.n_layers == 62 ? 1.0f / std::sqrt(float(c.dim / c.n_heads)) : 1.0f / std::sqrt(float(c.head_dim));
  c.final_logit_softcap = float(file.get_float_opt(p + "final_logit_softcapping").value_or(0.0));
  if (!(c.final_logit_softcap >= 0))
    fail("{}: metadata 'gemma3.final_logit_softcapping' must not be negative", file.path());
}

namespace {

// The period whose pattern gives exactly `local`, or -1.
int period_of(const std::vector<bool>& local) {
  for (int period = 0; period <= int(local.size()) + 1; ++period) {
    bool same = true;
    for (size_t l = 0; l < local.size() && same; ++l) same = gemma3_layer_is_local(int(l), period) == local[l];
    if (same) return period;
  }
  return -1;
}

}  // namespace

void write_gemma3_config(const ModelConfig& c, gguf::Writer& w) {
  int window = 0;
  std::vector<bool> local;
  for (int layer_window : c.layer_window) {
    window = std::max(window, layer_window);
    local.push_back(layer_window > 0);
  }
  if (window > 0) {
    w.set("gemma3.attention.sliding_window", gguf::Value::of_u32(uint32_t(window)));
    // The default pattern is left out, as the converter does; another one is written as the
    // period llama.cpp reads, or as one bool per layer when no period gives it.
    const int period = period_of(local);
    bool is_default = true;
    for (size_t l = 0; l < local.size(); ++l) is_default &= local[l] == gemma3_layer_is_local(int(l), kDefaultPeriod);
    if (!is_default) {
      gguf::Value pattern;
      if (period >= 0) {
        pattern = gguf::Value::of_u32(uint32_t(period));
      } else {
        pattern.type = gguf::ValueType::ARRAY;
        pattern.array_type = gguf::ValueType::BOOL;
        for (bool b : local) pattern.array.push_back(gguf::Value::of_bool(b));
      }
      w.set("gemma3.attention.sliding_window_pattern", pattern);
    }
  }
  if (c.final_logit_softcap > 0) w.set("gemma3.final_logit_softcapping", gguf::Value::of_f32(c.final_logit_softcap));
  if (c.rope_freq_scale != 1.0f) {
    w.set("gemma3.rope.scaling.type", gguf::Value::of_string("linear"));
    w.set("gemma3.rope.scaling.factor", gguf::Value::of_f32(1.0f / c.rope_freq_scale));
  }
}

}  // namespace kvslim
