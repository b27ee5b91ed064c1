#include "model/quantize_preset.h"

#include <cstdlib>

#include "util/error.h"

namespace kvslim {
namespace {

bool contains(const std::string& name, const char* part) { return name.find(part) != std::string::npos; }

// llama.cpp's "use more bits" layers: the first and last eighth, and every third layer between.
bool more_bits_layer(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

bool fits(DType type, int64_t row_length) { return row_length % dtype_block_size(type) == 0; }

// The type a row that the wanted type cannot hold falls back to (see the header).
DType fallback_for(DType wanted) {
  switch (wanted) {
    case DType::Q2_K:
    case DType::Q3_K: return DType::Q4_0;
    case DType::Q4_K: return DType::Q5_0;
    case DType::Q5_K: return DType::Q5_1;
    case DType::Q6_K: return DType::Q8_0;
    case DType::IQ4_XS: return DType::IQ4_NL;
    default: return DType::F16;
  }
}

// The preset's rules before the fallback (the table in the header).
DType preset_type(const QuantPresetInfo& preset, const TensorRole& role) {
  const QuantPreset p = preset.preset;
  const std::string& name = role.name;
  const bool is_output = name == "output.weight" || (!role.model_has_output && name == "token_embd.weight");
  const bool mxfp4 = p == QuantPreset::MXFP4_MOE || p == QuantPreset::MXFP4;
  if (is_output) {
    if (mxfp4 || !fits(preset.base, role.row_length)) return DType::Q8_0;
    return preset.base == DType::Q8_0 ? DType::Q8_0 : DType::Q6_K;
  }
  if (p == QuantPreset::MXFP4_MOE) return role.expert ? DType::MXFP4 : DType::Q8_0;
  if (name == "token_embd.weight") return preset.base;
  const int i = role.layer < 0 ? 0 : role.layer;
  const int n = role.n_layers;
  if (contains(name, "attn_v.weight")) {
    switch (p) {
      case QuantPreset::Q2_K: return role.gqa >= 4 ? DType::Q4_K : DType::Q3_K;
      case QuantPreset::Q3_K_M: return i < 2 ? DType::Q5_K : DType::Q4_K;
      case QuantPreset::Q4_K_M:
      case QuantPreset::Q5_K_M: return more_bits_layer(i, n) ? DType::Q6_K : preset.base;
      case QuantPreset::Q4_K_S: return i < 4 ? DType::Q5_K : preset.base;
      case QuantPreset::IQ4_NL:
      case QuantPreset::IQ4_XS: return role.gqa >= 4 ? DType::Q5_K : preset.base;
      default: return preset.base;
    }
  }
  if (contains(name, "ffn_down")) {
    switch (p) {
      case QuantPreset::Q2_K: return DType::Q3_K;
      case QuantPreset::Q3_K_M: return i < n / 16 ? DType::Q5_K : DType::Q4_K;
      case QuantPreset::Q4_K_M:
      case QuantPreset::Q5_K_M: return more_bits_layer(i, n) ? DType::Q6_K : preset.base;
      case QuantPreset::Q4_K_S:
      case QuantPreset::IQ4_NL:
      case QuantPreset::IQ4_XS: return i < n / 8 ? DType::Q5_K : preset.base;
      default: return preset.base;
    }
  }
  if (contains(name, "attn_output.weight")) {
    if (p == QuantPreset::Q2_K) return DType::Q3_K;
    if (p == QuantPreset::Q3_K_M) return DType::Q4_K;
  }
  return preset.base;
}

}  // namespace

const std::vector<QuantPresetInfo>& quant_presets() {
  static const std::vector<QuantPresetInfo> presets = {
      {QuantPreset::Q8_0, "q8_0", DType::Q8_0, 7},        {QuantPreset::Q4_0, "q4_0", DType::Q4_0, 2},
      {QuantPreset::Q4_1, "q4_1", DType::Q4_1, 3},        {QuantPreset::Q5_0, "q5_0", DType::Q5_0, 8},
      {QuantPreset::Q5_1, "q5_1", DType::Q5_1, 9},        {QuantPreset::Q2_K, "q2_k", DType::Q2_K, 10},
      {QuantPreset::Q3_K_S, "q3_k_s", DType::Q3_K, 11},   {QuantPreset::Q3_K_M, "q3_k_m", DType::Q3_K, 12},
      {QuantPreset::Q4_K_S, "q4_k_s", DType::Q4_K, 14},   {QuantPreset::Q4_K_M, "q4_k_m", DType::Q4_K, 15},
      {QuantPreset::Q5_K_S, "q5_k_s", DType::Q5_K, 16},   {QuantPreset::Q5_K_M, "q5_k_m", DType::Q5_K, 17},
      {QuantPreset::Q6_K, "q6_k", DType::Q6_K, 18},       {QuantPreset::IQ4_NL, "iq4_nl", DType::IQ4_NL, 25},
      {QuantPreset::IQ4_XS, "iq4_xs", DType::IQ4_XS, 30}, {QuantPreset::MXFP4_MOE, "mxfp4_moe", DType::MXFP4, 38},
      {QuantPreset::MXFP4, "mxfp4", DType::MXFP4, 38},
  };
  return presets;
}

const QuantPresetInfo& quant_preset_from_name(const std::string& name) {
  std::string lower;
  for (char c : name) lower += char(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  std::string valid;
  for (const QuantPresetInfo& info : quant_presets()) {
    if (lower == info.name) return info;
    valid += valid.empty() ? "" : " ";
    valid += info.name;
  }
  fail("unknown quantization type \"{}\" (valid: {})", name, valid);
}

bool is_quantizable_tensor(const std::string& name, const std::vector<uint64_t>& dims) {
  if (name.size() < 6 || name.compare(name.size() - 6, 6, "weight") != 0) return false;
  // ggml's dimension count ignores trailing dimensions of 1.
  size_t n_dims = 1;
  for (size_t d = 0; d < dims.size(); ++d)
    if (dims[d] > 1) n_dims = d + 1;
  if (n_dims < 2) return false;
  return !contains(name, "_norm.weight");
}

int tensor_layer(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  char* end = nullptr;
  const long layer = std::strtol(name.c_str() + 4, &end, 10);
  if (end == name.c_str() + 4 || *end != '.' || layer < 0) return -1;
  return int(layer);
}

TensorTypeChoice choose_tensor_type(const QuantPresetInfo& preset, const TensorRole& role) {
  TensorTypeChoice choice{preset_type(preset, role), DType::F32, false};
  choice.wanted = choice.type;
  while (!fits(choice.type, role.row_length)) {
    choice.type = fallback_for(choice.type);
    choice.fallback = true;
  }
  return choice;
}

}  // namespace kvslim
