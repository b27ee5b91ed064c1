// The per-tensor types of the quantization presets, against the table written out by hand from
// llama.cpp's rules (src/model/quantize_preset.h), and the fallbacks for rows that are not whole
// blocks.
#include <gtest/gtest.h>

#include <set>

#include "model/quantize_preset.h"
#include "util/error.h"

namespace kvslim {
namespace {

TensorRole role(const std::string& name, int64_t row, int n_layers = 16, int gqa = 4, bool has_output = true) {
  TensorRole r;
  r.name = name;
  r.layer = tensor_layer(name);
  r.n_layers = n_layers;
  r.gqa = gqa;
  r.model_has_output = has_output;
  r.row_length = row;
  return r;
}

DType type_of(const char* preset, const std::string& name, int64_t row = 2048, int n_layers = 16, int gqa = 4,
              bool has_output = true) {
  return choose_tensor_type(quant_preset_from_name(preset), role(name, row, n_layers, gqa, has_output)).type;
}

std::string blk(int i, const char* what) { return "blk." + std::to_string(i) + "." + what; }

TEST(QuantizePreset, NamesAndFileTypes) {
  EXPECT_EQ(quant_presets().size(), 17u);
  EXPECT_EQ(quant_preset_from_name("MXFP4_MOE").llama_ftype, 38u);  // LLAMA_FTYPE_MOSTLY_MXFP4_MOE
  EXPECT_EQ(quant_preset_from_name("mxfp4").base, DType::MXFP4);
  EXPECT_EQ(quant_preset_from_name("IQ4_XS").llama_ftype, 30u);
  EXPECT_EQ(quant_preset_from_name("iq4_nl").llama_ftype, 25u);
  EXPECT_EQ(quant_preset_from_name("Q4_K_M").llama_ftype, 15u);
  EXPECT_EQ(quant_preset_from_name("q8_0").llama_ftype, 7u);
  EXPECT_EQ(quant_preset_from_name("q5_0").llama_ftype, 8u);
  EXPECT_EQ(quant_preset_from_name("q6_k").base, DType::Q6_K);
  try {
    quant_preset_from_name("q4_k_l");
    FAIL() << "unknown preset accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q4_k_l"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("q5_k_m"), std::string::npos);  // lists the valid ones
  }
}

TEST(QuantizePreset, WhichTensorsAreQuantized) {
  EXPECT_TRUE(is_quantizable_tensor("blk.0.attn_q.weight", {2048, 2048}));
  EXPECT_TRUE(is_quantizable_tensor("token_embd.weight", {2048, 32000}));
  EXPECT_FALSE(is_quantizable_tensor("blk.0.attn_norm.weight", {2048}));
  EXPECT_FALSE(is_quantizable_tensor("blk.0.attn_q_norm.weight", {64, 1}));  // 2-D only by a trailing 1
  EXPECT_FALSE(is_quantizable_tensor("blk.0.attn_q.bias", {2048, 1}));
  EXPECT_FALSE(is_quantizable_tensor("rope_freqs.weight", {32}));
  EXPECT_EQ(tensor_layer("blk.13.ffn_down.weight"), 13);
  EXPECT_EQ(tensor_layer("output.weight"), -1);
  EXPECT_EQ(tensor_layer("blk.x.ffn_down.weight"), -1);
}

// llama.cpp without importance matrix: attn_v in q5_k when 4+ query heads share a KV head,
// ffn_down in q5_k on the first eighth of the layers, output in q6_k; rows that are not whole
// 256-value blocks fall back from iq4_xs to iq4_nl.
TEST(QuantizePreset, IQ4PresetsKeepFiveBitsWhereLlamaCppDoes) {
  for (const char* p : {"iq4_nl", "iq4_xs"}) {
    const DType base = quant_preset_from_name(p).base;
    EXPECT_EQ(type_of(p, blk(3, "attn_v.weight"), 2048, 16, 4), DType::Q5_K) << p;
    EXPECT_EQ(type_of(p, blk(3, "attn_v.weight"), 2048, 16, 2), base) << p;
    EXPECT_EQ(type_of(p, blk(1, "ffn_down.weight")), DType::Q5_K) << p;
    EXPECT_EQ(type_of(p, blk(2, "ffn_down.weight")), base) << p;
    EXPECT_EQ(type_of(p, blk(5, "attn_q.weight")), base) << p;
    EXPECT_EQ(type_of(p, "output.weight"), DType::Q6_K) << p;
  }
  EXPECT_EQ(type_of("iq4_xs", blk(5, "attn_q.weight"), 2080), DType::IQ4_NL);
}

TEST(QuantizePreset, Q4KMUsesSixBitsOnTheMoreBitsLayers) {
  // 16 layers: n/8 = 2, 7n/8 = 14; (i - 2) % 3 == 2 adds 4, 7, 10, 13.
  const std::set<int> more_bits = {0, 1, 4, 7, 10, 13, 14, 15};
  for (int i = 0; i < 16; ++i) {
    const DType expected = more_bits.count(i) ? DType::Q6_K : DType::Q4_K;
    EXPECT_EQ(type_of("q4_k_m", blk(i, "attn_v.weight")), expected) << i;
    EXPECT_EQ(type_of("q4_k_m", blk(i, "ffn_down.weight"), 8192), expected) << i;
    EXPECT_EQ(type_of("q5_k_m", blk(i, "attn_v.weight")), more_bits.count(i) ? DType::Q6_K : DType::Q5_K) << i;
    EXPECT_EQ(type_of("q4_k_m", blk(i, "attn_q.weight")), DType::Q4_K);
    EXPECT_EQ(type_of("q4_k_m", blk(i, "ffn_up.weight")), DType::Q4_K);
    EXPECT_EQ(type_of("q4_k_m", blk(i, "attn_output.weight")), DType::Q4_K);
  }
  EXPECT_EQ(type_of("q4_k_m", "output.weight"), DType::Q6_K);
  EXPECT_EQ(type_of("q4_k_m", "token_embd.weight"), DType::Q4_K);
  // Tied embeddings: token_embd plays the output's part.
  EXPECT_EQ(type_of("q4_k_m", "token_embd.weight", 2048, 16, 4, /*has_output=*/false), DType::Q6_K);
}

TEST(QuantizePreset, SmallAndTwoBitPresets) {
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(type_of("q4_k_s", blk(i, "attn_v.weight")), i < 4 ? DType::Q5_K : DType::Q4_K);
    EXPECT_EQ(type_of("q4_k_s", blk(i, "ffn_down.weight"), 8192), i < 2 ? DType::Q5_K : DType::Q4_K);
    EXPECT_EQ(type_of("q3_k_m", blk(i, "attn_v.weight")), i < 2 ? DType::Q5_K : DType::Q4_K);
    EXPECT_EQ(type_of("q3_k_m", blk(i, "ffn_down.weight"), 8192), i < 1 ? DType::Q5_K : DType::Q4_K);
    EXPECT_EQ(type_of("q3_k_m", blk(i, "attn_output.weight")), DType::Q4_K);
    EXPECT_EQ(type_of("q3_k_m", blk(i, "ffn_gate.weight")), DType::Q3_K);
    EXPECT_EQ(type_of("q3_k_s", blk(i, "attn_v.weight")), DType::Q3_K);
    EXPECT_EQ(type_of("q2_k", blk(i, "attn_v.weight")), DType::Q4_K);               // gqa 4
    EXPECT_EQ(type_of("q2_k", blk(i, "attn_v.weight"), 2048, 16, 2), DType::Q3_K);  // gqa 2
    EXPECT_EQ(type_of("q2_k", blk(i, "ffn_down.weight"), 8192), DType::Q3_K);
    EXPECT_EQ(type_of("q2_k", blk(i, "attn_output.weight")), DType::Q3_K);
    EXPECT_EQ(type_of("q2_k", blk(i, "attn_k.weight")), DType::Q2_K);
  }
  for (const char* legacy : {"q4_0", "q4_1", "q5_0", "q5_1"}) {
    EXPECT_EQ(type_of(legacy, "output.weight"), DType::Q6_K) << legacy;
    EXPECT_EQ(type_of(legacy, blk(3, "attn_v.weight")), quant_preset_from_name(legacy).base) << legacy;
  }
  EXPECT_EQ(type_of("q8_0", "output.weight"), DType::Q8_0);
  EXPECT_EQ(type_of("q6_k", blk(0, "attn_v.weight")), DType::Q6_K);
}

TEST(QuantizePreset, RowsThatAreNotWholeBlocksFallBack) {
  const QuantPresetInfo& q4km = quant_preset_from_name("q4_k_m");
  // 128-wide rows: no K-quant fits.
  TensorTypeChoice c = choose_tensor_type(q4km, role("blk.5.attn_q.weight", 128));
  EXPECT_EQ(c.type, DType::Q5_0);
  EXPECT_EQ(c.wanted, DType::Q4_K);
  EXPECT_TRUE(c.fallback);
  EXPECT_EQ(type_of("q4_k_m", blk(0, "attn_v.weight"), 128), DType::Q8_0);  // q6_k -> q8_0
  EXPECT_EQ(type_of("q5_k_s", blk(5, "attn_q.weight"), 128), DType::Q5_1);
  EXPECT_EQ(type_of("q3_k_s", blk(5, "attn_q.weight"), 128), DType::Q4_0);
  EXPECT_EQ(type_of("q2_k", blk(5, "attn_k.weight"), 384), DType::Q4_0);
  // The output's rows are checked against the base type first: q8_0 when they do not fit.
  EXPECT_EQ(type_of("q4_k_m", "output.weight", 128), DType::Q8_0);
  EXPECT_EQ(type_of("q4_0", "output.weight", 128), DType::Q8_0);  // fits q4_0, not q6_k
  // Rows that not even 32-value blocks divide: f16.
  c = choose_tensor_type(q4km, role("blk.1.attn_q.weight", 100));
  EXPECT_EQ(c.type, DType::F16);
  EXPECT_TRUE(c.fallback);
  EXPECT_EQ(type_of("q4_0", blk(1, "attn_q.weight"), 100), DType::F16);
  EXPECT_FALSE(choose_tensor_type(q4km, role("blk.1.attn_q.weight", 256)).fallback);
}

// llama.cpp's MXFP4_MOE: expert stacks (3-D, ne2 > 1) mxfp4, every other matrix q8_0 (the output
// too); kvslim's mxfp4: every matrix mxfp4 but the output, q8_0.
TEST(QuantizePreset, Mxfp4Presets) {
  const auto& moe = quant_preset_from_name("mxfp4_moe");
  TensorRole expert = role(blk(3, "ffn_up_exps.weight"), 2048);
  expert.expert = true;
  EXPECT_EQ(choose_tensor_type(moe, expert).type, DType::MXFP4);
  EXPECT_EQ(type_of("mxfp4_moe", blk(3, "ffn_gate_inp.weight")), DType::Q8_0);
  EXPECT_EQ(type_of("mxfp4_moe", blk(3, "attn_v.weight")), DType::Q8_0);
  EXPECT_EQ(type_of("mxfp4_moe", "token_embd.weight"), DType::Q8_0);
  EXPECT_EQ(type_of("mxfp4_moe", "output.weight"), DType::Q8_0);
  for (const char* name : {"token_embd.weight", "blk.0.attn_v.weight", "blk.0.ffn_down.weight", "blk.7.attn_q.weight"})
    EXPECT_EQ(type_of("mxfp4", name), DType::MXFP4) << name;
  EXPECT_EQ(type_of("mxfp4", "output.weight"), DType::Q8_0);
  EXPECT_EQ(type_of("mxfp4", "token_embd.weight", 2048, 16, 4, false), DType::Q8_0);  // tied: it is the output
  EXPECT_EQ(type_of("mxfp4", blk(0, "attn_q.weight"), 48), DType::F16);               // rows not whole 32-value blocks
}

}  // namespace
}  // namespace kvslim
