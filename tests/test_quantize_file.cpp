// `kvslim quantize`: the file it writes read back through the GGUF reader (per-tensor types as the
// preset says, fallback rows, untouched norms, metadata, values within the type's error), a model
// loaded from it, and the refused inputs (each one clear line, no output file left behind).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <filesystem>
#include <fstream>

#include "cli_helpers.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/quantize_file.h"
#include "kv/paged_cache.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim {
namespace {

using testing::make_model;
using testing::temp_path;
using testing::TinyModel;

// 256-wide rows (K-quants fit) and 384-wide ffn_down rows (they do not); 4 query heads over one
// KV head (gqa 4), 2 layers.
std::string source_model() {
  TinyModel m;
  m.dim = 256;
  m.ffn = 384;
  m.heads = 4;
  m.kv_heads = 1;
  m.layers = 2;
  m.type = DType::F32;
  return make_model(m);
}

std::vector<float> values(const gguf::File& file, const gguf::TensorInfo& t) {
  std::vector<float> out(t.n_elements);
  convert_to_f32(dtype_from_ggml(t.type), file.tensor_data(t), out.data(), int64_t(t.n_elements));
  return out;
}

double rms(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  return std::sqrt(s / double(v.size()));
}

TEST(QuantizeFile, Q4KMRoundTripThroughTheReader) {
  const std::string in_path = source_model();
  const std::string out_path = temp_path("q4km.gguf");
  ThreadPool pool(2);
  std::vector<QuantizedTensor> reports;
  QuantizeOptions options;
  options.preset = "q4_k_m";
  const QuantizeSummary summary =
      quantize_file(in_path, out_path, options, pool, [&](const QuantizedTensor& t) { reports.push_back(t); });

  const gguf::File in = gguf::File::open(in_path);
  const gguf::File out = gguf::File::open(out_path);
  ASSERT_EQ(out.tensors().size(), in.tensors().size());
  EXPECT_EQ(out.get_uint("general.file_type"), 15u);
  EXPECT_EQ(out.get_uint("general.quantization_version"), 2u);
  EXPECT_EQ(out.get_string("general.architecture"), "llama");
  EXPECT_EQ(out.get_string_array("tokenizer.ggml.tokens"), in.get_string_array("tokenizer.ggml.tokens"));

  // Hand-derived from the preset table for 2 layers: the "more bits" layers are {1} (i >= 7n/8).
  const std::map<std::string, DType> expected = {
      {"token_embd.weight", DType::Q4_K},
      {"output.weight", DType::Q6_K},
      {"blk.0.attn_q.weight", DType::Q4_K},
      {"blk.0.attn_k.weight", DType::Q4_K},
      {"blk.0.attn_v.weight", DType::Q4_K},
      {"blk.1.attn_v.weight", DType::Q6_K},
      {"blk.0.attn_output.weight", DType::Q4_K},
      {"blk.0.ffn_gate.weight", DType::Q4_K},
      {"blk.1.ffn_up.weight", DType::Q4_K},
      {"blk.0.ffn_down.weight", DType::Q5_0},  // q4_k wanted, 384-wide rows: fallback
      {"blk.1.ffn_down.weight", DType::Q8_0},  // q6_k wanted (more bits), fallback
      {"output_norm.weight", DType::F32},
      {"blk.1.attn_norm.weight", DType::F32},
  };
  for (const auto& [name, type] : expected) {
    const gguf::TensorInfo* t = out.find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->type, ggml_type_id(type)) << name << " is " << gguf::tensor_type_name(t->type);
  }
  int fallbacks = 0;
  for (const QuantizedTensor& r : reports) {
    const gguf::TensorInfo* a = in.find_tensor(r.name);
    const gguf::TensorInfo* b = out.find_tensor(r.name);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(a->dims, b->dims) << r.name;
    if (!r.quantized) {
      // Copied byte for byte.
      ASSERT_EQ(a->n_bytes, b->n_bytes);
      EXPECT_EQ(std::memcmp(in.tensor_data(*a), out.tensor_data(*b), a->n_bytes), 0) << r.name;
      continue;
    }
    fallbacks += r.fallback;
    // The reported RMSE is the one of the values written, and it is small against the weights.
    const std::vector<float> x = values(in, *a), y = values(out, *b);
    double se = 0;
    for (size_t i = 0; i < x.size(); ++i) se += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    EXPECT_NEAR(std::sqrt(se / double(x.size())), r.rmse, 1e-6 * rms(x) + 1e-12) << r.name;
    EXPECT_LT(r.rmse, 0.15 * rms(x)) << r.name << " " << dtype_name(r.type);
    EXPECT_GT(r.rmse, 0.0) << r.name;
  }
  EXPECT_EQ(fallbacks, 2);
  EXPECT_EQ(summary.fallbacks, 2);
  EXPECT_LT(summary.bytes_out, summary.bytes_in / 4);
  EXPECT_FALSE(std::filesystem::exists(out_path + ".tmp"));
}

TEST(QuantizeFile, Q8ModelRunsCloseToTheF32One) {
  const std::string in_path = source_model();
  const std::string out_path = temp_path("q8.gguf");
  ThreadPool pool(2);
  QuantizeOptions options;
  options.preset = "q8_0";
  quantize_file(in_path, out_path, options, pool);
  const auto a = Model::load(in_path);
  const auto b = Model::load(out_path);
  EXPECT_EQ(b->layers()[0].wq.type, DType::Q8_0);
  const std::vector<int32_t> tokens = a->tokenizer().encode("the quick brown fox", true, false);
  std::vector<std::vector<float>> logits;
  for (const Model* m : {a.get(), b.get()}) {
    PagedKvCache cache(kv_shape(m->config()), 64);
    Forward forward(*m, 64);
    const float* l = forward.run(tokens.data(), int(tokens.size()), 0, cache, pool);
    logits.emplace_back(l, l + m->config().n_vocab);
  }
  double diff = 0, norm = 0;
  for (size_t i = 0; i < logits[0].size(); ++i) {
    diff += (logits[0][i] - logits[1][i]) * double(logits[0][i] - logits[1][i]);
    norm += double(logits[0][i]) * logits[0][i];
  }
  // q8_0 weights (relative RMSE ~0.3%) and the int8 kernels' q8 activations through two random
  // layers: measured 2.4%; a broken file (wrong type, scales or layout) gives ~100%.
  EXPECT_LT(std::sqrt(diff / norm), 0.05);
}

class QuantizeCli : public ::testing::Test {
 protected:
  void expect_refused(const std::string& args, const std::string& out, const std::string& needle) {
    const testing::CommandResult r = testing::run("quantize " + args);
    testing::expect_clean_error(r, needle);
    EXPECT_FALSE(std::filesystem::exists(out)) << out;
    EXPECT_FALSE(std::filesystem::exists(out + ".tmp")) << out;
  }
};

TEST_F(QuantizeCli, RefusedInputsLeaveNoFile) {
  const std::string in = source_model();
  const std::string out = temp_path("refused.gguf");
  std::filesystem::remove(out);
  expect_refused(in + " " + out + " --type q4_k_l", out, "unknown quantization type \"q4_k_l\"");
  expect_refused(temp_path("missing.gguf") + " " + out + " --type q4_0", out, "missing.gguf");
  expect_refused(in + " " + temp_path("no-such-dir/out.gguf") + " --type q4_0", temp_path("no-such-dir/out.gguf"),
                 "does not exist");
  expect_refused(in + " " + in + " --type q4_0", out, "output is the input");

  // A truncated copy of the model: its tensor data ends early.
  const std::string truncated = temp_path("truncated.gguf");
  std::filesystem::copy_file(in, truncated, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(truncated, std::filesystem::file_size(in) - 1000);
  expect_refused(truncated + " " + out + " --type q4_0", out, "truncated.gguf");

  // An already quantized input is refused unless --allow-requantize.
  const std::string q8 = temp_path("cli-q8.gguf");
  const testing::CommandResult made = testing::run("quantize " + in + " " + q8 + " --type q8_0 --threads 2");
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_NE(made.err.find("q8_0"), std::string::npos);
  EXPECT_NE(made.err.find("rmse"), std::string::npos);
  EXPECT_NE(made.err.find("MiB"), std::string::npos);
  expect_refused(q8 + " " + out + " --type q4_0", out, "--allow-requantize");
  const testing::CommandResult again =
      testing::run("quantize " + q8 + " " + out + " --type q4_0 --allow-requantize --threads 2");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(gguf::File::open(out).find_tensor("blk.0.attn_q.weight")->type, ggml_type_id(DType::Q4_0));
  std::filesystem::remove(out);
}

TEST_F(QuantizeCli, SaysWhichRowsFellBack) {
  const std::string in = source_model();
  const std::string out = temp_path("fallback-cli.gguf");
  const testing::CommandResult r = testing::run("quantize " + in + " " + out + " --type q5_k_m --threads 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t line_start = r.err.find("blk.0.ffn_down.weight");
  ASSERT_NE(line_start, std::string::npos) << r.err;
  const std::string line = r.err.substr(line_start, r.err.find('\n', line_start) - line_start);
  EXPECT_NE(line.find("fallback"), std::string::npos) << line;
  EXPECT_NE(line.find("q5_1"), std::string::npos) << line;
  EXPECT_NE(line.find("q5_k"), std::string::npos) << line;
}

}  // namespace
}  // namespace kvslim
