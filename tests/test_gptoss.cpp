// gpt-oss's attention side outside the kernels: YaRN RoPE (against hand-computed values and a
// naive implementation of llama.cpp's formula written here), the config read from a gpt-oss GGUF
// (window pattern, YaRN keys, attention tensors with biases and sinks), and its bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "forward_checks.h"
#include "gguf/gguf.h"
#include "model/config.h"
#include "model/gptoss_config.h"
#include "model/model.h"
#include "model/moe_weights.h"
#include "tensor/ops.h"
#include "random_values.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim {
namespace {

using testing::edited_copy;
using testing::expect_load_error;

// ---- YaRN ----

TEST(YarnRope, CorrectionDimsAreHandComputed) {
  float dims[2];
  // n_rot 8, base 1e4, 4096 positions: 8 ln(4096 / (32 * 2 pi)) / (2 ln 1e4) = 1.309 -> floor 1;
  // with beta 1: 2.814 -> ceil 3.
  rope_yarn_corr_dims(8, 4096, 10000.0f, 32.0f, 1.0f, dims);
  EXPECT_EQ(dims[0], 1.0f);
  EXPECT_EQ(dims[1], 3.0f);
  // gpt-oss: n_rot 64, base 150000: 8.09 -> 8 and 17.40 -> 18.
  rope_yarn_corr_dims(64, 4096, 150000.0f, 32.0f, 1.0f, dims);
  EXPECT_EQ(dims[0], 8.0f);
  EXPECT_EQ(dims[1], 18.0f);
  // Clamped to [0, n_rot - 1]: a tiny original context puts the start below 0, a huge one the end above.
  rope_yarn_corr_dims(8, 16, 10000.0f, 32.0f, 1.0f, dims);
  EXPECT_EQ(dims[0], 0.0f);
  rope_yarn_corr_dims(8, 1 << 30, 10.0f, 32.0f, 1.0f, dims);
  EXPECT_EQ(dims[1], 7.0f);
}

RopeConfig yarn_config(int head_dim, int n_rot, bool neox) {
  RopeConfig c;
  c.head_dim = head_dim;
  c.n_rot = n_rot;
  c.base = 10000.0f;
  c.freq_scale = 1.0f / 32.0f;
  c.neox = neox;
  c.ext_factor = 1.0f;
  c.original_context = 4096;
  return c;
}

TEST(YarnRope, HandComputedValuesAtPositionOne) {
  // Pairs (1, 0) rotated at position 1 by theta_i and scaled by mscale = 1 + 0.1 ln 32 = 1.34657.
  // Correction dims [1, 3]: pairs 0 and 1 extrapolate (theta = base^(-2i/8)), pair 2 blends half
  // and half (0.5 * 0.01 + 0.5 * 0.01 / 32 = 0.00515625), pair 3 interpolates (1e-3 / 32).
  std::vector<float> x = {1, 1, 1, 1, 0, 0, 0, 0};
  rope_inplace(x.data(), 1, 1, yarn_config(8, 8, true));
  const std::vector<float> want = {0.7275568f, 1.3398463f, 1.3465557f, 1.3465736f,
                                   1.1331026f, 0.1344330f, 0.0069432f, 4.208042e-5f};
  for (size_t i = 0; i < 8; ++i) EXPECT_NEAR(x[i], want[i], 2e-6) << i;
  // ext_factor 0 is plain linear scaling: theta_0 = 1/32, no magnitude change.
  std::vector<float> y = {1, 1, 1, 1, 0, 0, 0, 0};
  RopeConfig linear = yarn_config(8, 8, true);
  linear.ext_factor = 0.0f;
  rope_inplace(y.data(), 1, 1, linear);
  EXPECT_NEAR(y[0], std::cos(1.0 / 32), 1e-7);
  EXPECT_NEAR(y[4], std::sin(1.0 / 32), 1e-7);
}

// llama.cpp's rope_yarn from its formula, in double: theta_extrap = p base^(-2i/n_rot),
// theta_interp = freq_scale theta_extrap, ramp(i) = 1 - clamp((i - low) / max(0.001, high - low)),
// theta = interp (1 - ramp ext) + extrap ramp ext, magnitude attn_factor (1 + 0.1 ln(1/freq_scale)).
std::vector<double> naive_yarn(const std::vector<float>& x, int n_heads, int64_t pos, const RopeConfig& c) {
  const double dim_fast = c.n_rot * std::log(c.original_context / (c.beta_fast * 2 * M_PI)) / (2 * std::log(c.base));
  const double dim_slow = c.n_rot * std::log(c.original_context / (c.beta_slow * 2 * M_PI)) / (2 * std::log(c.base));
  const double low = std::max(0.0, std::floor(dim_fast)), high = std::min(c.n_rot - 1.0, std::ceil(dim_slow));
  const double mscale = c.attn_factor * (c.ext_factor != 0 ? 1 + 0.1 * std::log(1.0 / c.freq_scale) : 1.0);
  std::vector<double> out(x.begin(), x.end());
  for (int h = 0; h < n_heads; ++h) {
    for (int i = 0; i < c.n_rot / 2; ++i) {
      const double extrap = double(pos) * std::pow(double(c.base), -2.0 * i / c.n_rot);
      const double ramp = 1 - std::min(1.0, std::max(0.0, (i - low) / std::max(0.001, high - low)));
      const double theta = extrap * c.freq_scale * (1 - ramp * c.ext_factor) + extrap * ramp * c.ext_factor;
      const int a = c.neox ? i : 2 * i, b = c.neox ? i + c.n_rot / 2 : 2 * i + 1;
      const double xa = x[size_t(h * c.head_dim + a)], xb = x[size_t(h * c.head_dim + b)];
      out[size_t(h * c.head_dim + a)] = (xa * std::cos(theta) - xb * std::sin(theta)) * mscale;
      out[size_t(h * c.head_dim + b)] = (xa * std::sin(theta) + xb * std::cos(theta)) * mscale;
    }
  }
  return out;
}

TEST(YarnRope, MatchesTheNaiveFormulaAtManyPositions) {
  for (bool neox : {true, false}) {
    for (int n_rot : {64, 32}) {  // 32 of 64: the last dims pass through
      RopeConfig c = yarn_config(64, n_rot, neox);
      c.base = 150000.0f;
      c.attn_factor = 0.9f;
      c.beta_fast = 24.0f;
      c.beta_slow = 2.0f;
      const int heads = 3;
      const auto x = test::normal_vec(size_t(heads * 64), 9);
      for (int64_t pos : {0, 1, 7, 100, 4095, 4096, 30000, 131071}) {
        std::vector<float> got = x;
        rope_inplace(got.data(), heads, pos, c);
        const auto want = naive_yarn(x, heads, pos, c);
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], want[i], 2e-4 * (1 + std::fabs(want[i])))
              << "neox " << neox << " n_rot " << n_rot << " pos " << pos << " [" << i << "]";
      }
    }
  }
}

TEST(YarnRope, LlamaCppAttentionFactor) {
  // get_mscale(32) / (1 + 0.1 ln 32) = 1: ggml's own 1 + 0.1 ln 32 is then the only magnitude.
  EXPECT_NEAR(yarn_attn_factor(32.0f, 1.0f), 1.0f, 1e-6);
  EXPECT_NEAR(yarn_attn_factor(32.0f, 0.5f), 0.5f, 1e-6);
  // A factor below 1: get_mscale is 1, the correction 1 / (1 + 0.1 ln 0.5) = 1 / 0.930685 stays.
  EXPECT_NEAR(yarn_attn_factor(0.5f, 1.0f), 1.0 / (1.0 + 0.1 * std::log(0.5)), 1e-6);
}

// ---- the gpt-oss config ----

// A gpt-oss file built from a tiny llama file (4 layers, dim 64, 4 query / 2 KV heads of 16):
// its keys renamed to gpt-oss.*, the gpt-oss keys added, q/k/v/o biases, sinks and
// post_attention_norm added, the dense FFN replaced by a mixture of 4 experts of width 32, 2 per
// token, with the router's and experts' biases.
std::string gptoss_file(const std::string& name, int n_sinks = 4) {
  testing::TinyModel tiny;
  tiny.layers = 4;
  const gguf::File in = gguf::File::open(testing::make_model(tiny));
  gguf::Writer w;
  for (const auto& entry : in.metadata()) {
    std::string key = entry.key;
    if (key.rfind("llama.", 0) == 0) key = "gpt-oss." + key.substr(6);
    w.set(key, entry.value);
  }
  w.set("general.architecture", gguf::Value::of_string("gpt-oss"));
  w.set("gpt-oss.attention.sliding_window", gguf::Value::of_u32(8));
  w.set("gpt-oss.rope.freq_base", gguf::Value::of_f32(150000.0f));
  w.set("gpt-oss.rope.scaling.type", gguf::Value::of_string("yarn"));
  w.set("gpt-oss.rope.scaling.factor", gguf::Value::of_f32(32.0f));
  w.set("gpt-oss.rope.scaling.original_context_length", gguf::Value::of_u32(128));
  w.set("gpt-oss.expert_count", gguf::Value::of_u32(4));
  w.set("gpt-oss.expert_used_count", gguf::Value::of_u32(2));
  w.set("gpt-oss.expert_feed_forward_length", gguf::Value::of_u32(32));
  auto f32_dims = [&](const std::string& tensor, std::vector<uint64_t> dims) {
    size_t n = 1;
    for (uint64_t d : dims) n *= d;
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = 0.25f - 0.01f * float(i % 50);  // varied, so routing is not a tie
    std::vector<uint8_t> bytes(n * 4);
    std::memcpy(bytes.data(), v.data(), bytes.size());
    w.add_tensor(tensor, 0, dims, bytes);
  };
  auto f32 = [&](const std::string& tensor, size_t n) { f32_dims(tensor, {uint64_t(n)}); };
  for (const gguf::TensorInfo& t : in.tensors()) {
    if (t.name.find("ffn_") != std::string::npos) continue;
    std::vector<uint8_t> bytes(in.tensor_data(t), in.tensor_data(t) + t.n_bytes);
    w.add_tensor(t.name, t.type, t.dims, bytes);
  }
  for (int l = 0; l < 4; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    f32(p + "attn_q.bias", 64);
    f32(p + "attn_k.bias", 32);
    f32(p + "attn_v.bias", 32);
    f32(p + "attn_output.bias", 64);
    f32(p + "attn_sinks.weight", l == 1 ? size_t(n_sinks) : 4);
    f32(p + "post_attention_norm.weight", 64);
    f32_dims(p + "ffn_gate_inp.weight", {64, 4});
    f32(p + "ffn_gate_inp.bias", 4);
    f32_dims(p + "ffn_gate_exps.weight", {64, 32, 4});
    f32_dims(p + "ffn_up_exps.weight", {64, 32, 4});
    f32_dims(p + "ffn_down_exps.weight", {32, 64, 4});
    f32_dims(p + "ffn_gate_exps.bias", {32, 4});
    f32_dims(p + "ffn_up_exps.bias", {32, 4});
    f32_dims(p + "ffn_down_exps.bias", {64, 4});
  }
  const std::string out = testing::temp_path(name);
  w.write(out);
  return out;
}

TEST(GptOssConfig, ReadsTheWindowPatternAndYarnAsLlamaCpp) {
  const ModelConfig c = ModelConfig::from_gguf(gguf::File::open(gptoss_file("gptoss.gguf")));
  EXPECT_EQ(c.arch, Arch::GptOss);
  EXPECT_STREQ(arch_name(c.arch), "gpt-oss");
  EXPECT_EQ(c.head_dim, 16);
  // llama.cpp's default period 2: layers 0 and 2 slide, 1 and 3 are full.
  EXPECT_EQ(c.layer_window, (std::vector<int>{8, 0, 8, 0}));
  EXPECT_TRUE(c.has_qkv_bias());
  EXPECT_TRUE(c.rope_neox());
  EXPECT_FLOAT_EQ(c.rope_base, 150000.0f);
  EXPECT_FLOAT_EQ(c.rope_base_local, 150000.0f);  // freq_base_swa absent: the global base
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 1.0f / 32);
  EXPECT_FLOAT_EQ(c.rope_freq_scale_local, 1.0f / 32);  // the sliding layers are scaled too
  EXPECT_EQ(c.rope_ext_factor, 1.0f);
  EXPECT_EQ(c.rope_beta_fast, 32.0f);
  EXPECT_EQ(c.rope_beta_slow, 1.0f);
  EXPECT_EQ(c.rope_original_context, 128);
  EXPECT_NEAR(c.rope_attn_factor, 1.0f, 1e-6);
  // The presses govern the full layers only (issue 26's machinery).
  const KvShape shape = kv_shape(c);
  EXPECT_EQ(shape.layer_window, c.layer_window);

  // Written back by to_gguf and read again: the same config.
  gguf::Writer w;
  c.to_gguf(w);
  const std::string path = testing::temp_path("gptoss-roundtrip.gguf");
  w.write(path);
  const ModelConfig back = ModelConfig::from_gguf(gguf::File::open(path));
  EXPECT_EQ(back.layer_window, c.layer_window);
  EXPECT_EQ(back.rope_freq_scale, c.rope_freq_scale);
  EXPECT_EQ(back.rope_ext_factor, c.rope_ext_factor);
  EXPECT_EQ(back.rope_original_context, c.rope_original_context);
  EXPECT_NEAR(back.rope_attn_factor, c.rope_attn_factor, 1e-6);

  // A stored period and base_swa are read as stored; scaling none leaves the full layers
  // unscaled but (as llama.cpp) not the sliding ones.
  const ModelConfig c3 = ModelConfig::from_gguf(
      gguf::File::open(edited_copy(gptoss_file("gptoss-3.gguf"), "gptoss-period3.gguf", [](gguf::Writer& w2) {
        w2.set("gpt-oss.attention.sliding_window_pattern", gguf::Value::of_u32(3));
        w2.set("gpt-oss.rope.freq_base_swa", gguf::Value::of_f32(10000.0f));
        w2.set("gpt-oss.rope.scaling.type", gguf::Value::of_string("none"));
      })));
  EXPECT_EQ(c3.layer_window, (std::vector<int>{8, 8, 0, 8}));
  EXPECT_FLOAT_EQ(c3.rope_base_local, 10000.0f);
  EXPECT_EQ(c3.rope_freq_scale, 1.0f);
  EXPECT_FLOAT_EQ(c3.rope_freq_scale_local, 1.0f / 32);
  EXPECT_EQ(c3.rope_ext_factor, 0.0f);
}

TEST(GptOssConfig, LoadsWithItsMixtureOfExperts) {
  const std::unique_ptr<Model> model = Model::load(gptoss_file("gptoss-load.gguf"));
  const ModelConfig& c = model->config();
  ASSERT_TRUE(c.is_moe());
  EXPECT_EQ(c.moe.n_experts, 4);
  EXPECT_EQ(c.moe.n_experts_used, 2);
  EXPECT_EQ(c.moe.expert_ffn_dim, 32);
  // llama.cpp fixes gpt-oss's routing and activation; the file does not say them.
  EXPECT_EQ(c.moe.gating, MoeGating::SoftmaxWeight);
  EXPECT_EQ(c.moe.activation, MoeActivation::SwigluOai);
  EXPECT_FALSE(c.moe.normalize_weights);
  const MoeWeights& moe = model->layers()[3].moe;
  EXPECT_EQ(moe.router_bias.size(), 4u);
  EXPECT_EQ(moe.down_bias.size(), 4u * 64);
  EXPECT_EQ(model->layers()[0].bo.size(), 64u);
}

TEST(GptOssConfig, ExpertBiasesAreRequired) {
  const std::string path = gptoss_file("gptoss-biases.gguf");
  for (const char* name : {"blk.1.ffn_gate_inp.bias", "blk.2.ffn_down_exps.bias"})
    expect_load_error(edited_copy(path, std::string("gptoss-no-") + name + ".gguf", {}, testing::without(name)), name);
}

TEST(GptOssConfig, BadFilesGiveErrorsNamingTheKeyOrTensor) {
  const std::string path = gptoss_file("gptoss-bad.gguf");
  expect_load_error(gptoss_file("gptoss-sinks.gguf", 3), "blk.1.attn_sinks.weight");
  expect_load_error(edited_copy(path, "gptoss-no-sinks.gguf", {}, testing::without("blk.2.attn_sinks.weight")),
                    "blk.2.attn_sinks.weight");
  expect_load_error(edited_copy(path, "gptoss-no-bo.gguf", {}, testing::without("blk.0.attn_output.bias")),
                    "blk.0.attn_output.bias");
  expect_load_error(edited_copy(path, "gptoss-no-bk.gguf", {}, testing::without("blk.3.attn_k.bias")),
                    "blk.3.attn_k.bias");
  expect_load_error(
      edited_copy(path, "gptoss-scaling.gguf",
                  [](gguf::Writer& w) { w.set("gpt-oss.rope.scaling.type", gguf::Value::of_string("dynamic")); }),
      "gpt-oss.rope.scaling.type");
  expect_load_error(
      edited_copy(path, "gptoss-window0.gguf",
                  [](gguf::Writer& w) { w.set("gpt-oss.attention.sliding_window", gguf::Value::of_u32(0)); }),
      "gpt-oss.attention.sliding_window");
  expect_load_error(
      edited_copy(path, "gptoss-window-big.gguf",
                  [](gguf::Writer& w) { w.set("gpt-oss.attention.sliding_window", gguf::Value::of_u32(100000)); }),
      "gpt-oss.attention.sliding_window");
  expect_load_error(edited_copy(path, "gptoss-pattern.gguf",
                                [](gguf::Writer& w) {
                                  gguf::Value pattern;
                                  pattern.type = gguf::ValueType::ARRAY;
                                  pattern.array_type = gguf::ValueType::BOOL;
                                  for (int i = 0; i < 3; ++i) pattern.array.push_back(gguf::Value::of_bool(true));
                                  w.set("gpt-oss.attention.sliding_window_pattern", pattern);
                                }),
                    "gpt-oss.attention.sliding_window_pattern");
  expect_load_error(edited_copy(path, "gptoss-rot.gguf",
                                [](gguf::Writer& w) { w.set("gpt-oss.rope.dimension_count", gguf::Value::of_u32(8)); }),
                    "gpt-oss.rope.dimension_count");
}

}  // namespace
}  // namespace kvslim
