#include "model/gptoss_config.h"

#include <cmath>
#include <optional>

#include "model/config.h"
#include "model/gemma3_config.h"
#include "util/error.h"

namespace kvslim {

namespace {

// llama.cpp's swa_period when the file stores none: layers 0, 2, 4, ... slide.
constexpr int kDefaultPeriod = 2;

}  // namespace

bool gptoss_layer_slides(int layer) { return gemma3_layer_is_local(layer, kDefaultPeriod); }

float yarn_attn_factor(float factor, float attn_factor) {
  const float mscale = factor <= 1.0f ? 1.0f : 0.1f * std::log(factor) + 1.0f;
  return mscale / (1.0f + 0.1f * std::log(factor)) * attn_factor;
}

void read_gptoss_config(const gguf::File& file, ModelConfig& c) {
  const std::string p = "gpt-oss.";
  if (c.n_rot != c.head_dim)
    fail("{}: metadata 'gpt-oss.rope.dimension_count' = {} must equal the head size {} (attention.key_length)",
         file.path(), c.n_rot, c.head_dim);
  // llama.cpp requires the window; 0 would mask every key, one beyond the context never slides.
  const uint64_t window = file.get_uint(p + "attention.sliding_window");
  if (window < 1 || window > uint64_t(c.context_length))
    fail("{}: metadata 'gpt-oss.attention.sliding_window' = {} is outside [1, context length {}]", file.path(), window,
         c.context_length);
  const std::vector<bool> local =
      local_layers(file, p + "attention.sliding_window_pattern", c.n_layers, kDefaultPeriod);
  c.layer_window.clear();
  for (int l = 0; l < c.n_layers; ++l) c.layer_window.push_back(local[size_t(l)] ? int(window) : 0);
  c.rope_base_local = float(file.get_float_opt(p + "rope.freq_base_swa").value_or(c.rope_base));
  if (!(c.rope_base_local > 0)) fail("{}: metadata 'gpt-oss.rope.freq_base_swa' must be positive", file.path());

  // llama.cpp: the scaling type defaults to linear; the factor (rope.scaling.factor, else
  // rope.scale_linear; 0 or absent: 1) scales the full layers unless the type is none, and the
  // sliding layers always (their rope_freq_scale_train_swa is the trained scale).
  const std::string scaling = file.get_string_opt(p + "rope.scaling.type").value_or("linear");
  if (scaling != "none" && scaling != "linear" && scaling != "yarn")
    fail("{}: unsupported 'gpt-oss.rope.scaling.type' '{}' (supported: none, linear, yarn)", file.path(), scaling);
  std::optional<double> factor = file.get_float_opt(p + "rope.scaling.factor");
  if (!factor) factor = file.get_float_opt(p + "rope.scale_linear");
  if (factor && !(*factor >= 0))
    fail("{}: metadata 'gpt-oss.rope.scaling.factor' = {} must be positive", file.path(), *factor);
  const float trained_scale = (!factor || *factor == 0) ? 1.0f : float(1.0 / *factor);
  c.rope_freq_scale = scaling == "none" ? 1.0f : trained_scale;
  c.rope_freq_scale_local = trained_scale;
  c.rope_ext_factor = scaling == "yarn" ? 1.0f : 0.0f;
  if (c.rope_ext_factor != 0.0f) c.rope_attn_factor = yarn_attn_factor(1.0f / c.rope_freq_scale, c.rope_attn_factor);
}

void write_gptoss_config(const ModelConfig& c, gguf::Writer& w) {
  int window = 0;
  std::vector<bool> local;
  for (int layer_window : c.layer_window) {
    window = std::max(window, layer_window);
    local.push_back(layer_window > 0);
  }
  w.set("gpt-oss.attention.sliding_window", gguf::Value::of_u32(uint32_t(window)));
  // llama.cpp's default layout (even layers slide) is left out, as its converter does: llama.cpp
  // reads this key as a period only.
  bool default_layout = true;
  for (size_t l = 0; l < local.size(); ++l) default_layout = default_layout && local[l] == gptoss_layer_slides(int(l));
  if (!default_layout) {
    gguf::Value pattern;
    pattern.type = gguf::ValueType::ARRAY;
    pattern.array_type = gguf::ValueType::BOOL;
    for (bool b : local) pattern.array.push_back(gguf::Value::of_bool(b));
    w.set("gpt-oss.attention.sliding_window_pattern", pattern);
  }
  w.set("gpt-oss.rope.freq_base_swa", gguf::Value::of_f32(c.rope_base_local));
  if (c.rope_ext_factor != 0.0f) {
    w.set("gpt-oss.rope.scaling.type", gguf::Value::of_string("yarn"));
    w.set("gpt-oss.rope.scaling.factor", gguf::Value::of_f32(1.0f / c.rope_freq_scale));
    w.set("gpt-oss.rope.scaling.original_context_length", gguf::Value::of_u32(uint32_t(c.rope_original_context)));
  } else {
    w.set("gpt-oss.rope.scaling.type", gguf::Value::of_string("none"));
  }
}

}  // namespace kvslim
