// The mxfp4 weight type: one block decoded by hand, the E8M0 scale at its edges, the quantiser
// against a reference re-derived here from the format (and ggml's rounding: exponent from
// floor(log2(amax)), nearest level, first code on ties), malformed mxfp4 tensors refused, a
// model in mxfp4 running like its dequantised copy, and `kvslim quantize` copying mxfp4 tensors
// byte for byte. The kernels' tests are in test_quant_dot.cpp, test_matmul_int8.cpp and
// test_neon_kernels.cpp (mxfp4 is in their type lists).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <vector>

#include "gguf/gguf.h"
#include "kv/paged_cache.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/quantize_file.h"
#include "test_models.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace kvslim {
namespace {

using testing::make_model;
using testing::temp_path;
using testing::TinyModel;

// The e2m1 values of codes 0-7 (sign bit 3 negates), from the OCP microscaling spec.
constexpr double kE2M1[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};

double e2m1(int code) { return (code & 8) ? -kE2M1[code & 7] : kE2M1[code & 7]; }

TEST(Mxfp4, OneBlockDecodedByHand) {
  // e = 130: scale 2^(130 - 127) = 8. Byte j holds code j (low nibble, value j) and code 15 - j
  // (high nibble, value j + 16).
  uint8_t block[17];
  block[0] = 130;
  for (int j = 0; j < 16; ++j) block[1 + j] = static_cast<uint8_t>(j | (15 - j) << 4);
  std::vector<float> y(32);
  convert_to_f32(DType::MXFP4, block, y.data(), 32);
  // Written out: codes 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6 times 8; codes 8..15 their negatives.
  const float want_low[16] = {0, 4, 8, 12, 16, 24, 32, 48, -0.0f, -4, -8, -12, -16, -24, -32, -48};
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], want_low[j]) << j;
    EXPECT_EQ(y[j + 16], want_low[15 - j]) << j;
  }
}

TEST(Mxfp4, E8M0ScaleAtItsEdges) {
  // The kernels' halved scale 2^(e - 128), exact down to the subnormals.
  EXPECT_EQ(e8m0_to_fp32_half(127), 0.5f);
  EXPECT_EQ(e8m0_to_fp32_half(128), 1.0f);
  EXPECT_EQ(e8m0_to_fp32_half(2), std::ldexp(1.0f, -126));
  EXPECT_EQ(e8m0_to_fp32_half(1), std::ldexp(1.0f, -127));  // subnormal
  EXPECT_EQ(e8m0_to_fp32_half(0), std::ldexp(1.0f, -128));  // subnormal
  EXPECT_EQ(e8m0_to_fp32_half(254), std::ldexp(1.0f, 126));
  // Decoding uses it: code 1 (0.5) at e = 0 is 2^-128.
  uint8_t block[17] = {0, 0x01};
  std::vector<float> y(32);
  convert_to_f32(DType::MXFP4, block, y.data(), 32);
  EXPECT_EQ(y[0], std::ldexp(1.0f, -128));
  EXPECT_EQ(y[16], 0.0f);
}

// The reference quantiser, from the format: the exponent puts amax in [4, 8) times 2^(e - 127)
// (floor(log2(amax)) - 2, from frexp: exact), each value takes the nearest representable value
// (errors in double), the lowest code on ties.
std::vector<uint8_t> reference_quantise(const std::vector<float>& x) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < x.size(); b += 32) {
    double amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(double(x[b + j])));
    int e = 0;
    if (amax > 0) {
      int exp2;
      (void)std::frexp(amax, &exp2);  // amax = m * 2^exp2, m in [0.5, 1): floor(log2) = exp2 - 1
      e = exp2 - 1 - 2 + 127;
    }
    const double scale = std::ldexp(1.0, e - 127);
    uint8_t qs[16] = {};
    for (int j = 0; j < 32; ++j) {
      int best = 0;
      for (int c = 1; c < 16; ++c) {
        if (std::fabs(e2m1(c) * scale - x[b + j]) < std::fabs(e2m1(best) * scale - x[b + j])) best = c;
      }
      qs[j % 16] |= static_cast<uint8_t>(j < 16 ? best : best << 4);
    }
    out.push_back(static_cast<uint8_t>(e));
    out.insert(out.end(), qs, qs + 16);
  }
  return out;
}

TEST(Mxfp4, QuantiserMatchesTheReferenceByteForByte) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(32 * 200);
  for (size_t i = 0; i < x.size(); ++i) {
    // Blocks of every magnitude from 2^-40 to 2^40, some all zero, some with one outlier.
    const int block = static_cast<int>(i / 32);
    x[i] = block % 17 == 3 ? 0.0f : std::ldexp(nd(rng), block % 81 - 40);
    if (block % 13 == 5 && i % 32 == 7) x[i] *= 50.0f;
  }
  // Exact grid points and midpoints between levels (ties go to the lower code).
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(e2m1(j % 16));
  for (int j = 0; j < 8; ++j) x[32 + j] = static_cast<float>((kE2M1[j] + kE2M1[(j + 1) % 8]) / 2);
  x[63] = 6.0f;
  std::vector<uint8_t> got(row_bytes(DType::MXFP4, int64_t(x.size())));
  convert_from_f32(x.data(), DType::MXFP4, got.data(), int64_t(x.size()));
  const std::vector<uint8_t> want = reference_quantise(x);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(int(got[i]), int(want[i])) << "byte " << i << " block " << i / 17;
  EXPECT_EQ(got[0], 127 + 0);  // amax 6: floor(log2 6) = 2, e = 2 - 2 + 127
  EXPECT_EQ(got[17 * 3], 0);   // an all-zero block (block 3) has e = 0
}

TEST(Mxfp4, RoundTripKeepsGridValuesAndBoundsTheError) {
  // Values on the grid come back exactly; Gaussian values within half a step of the top binade.
  std::vector<float> x(64);
  for (int j = 0; j < 64; ++j) x[j] = static_cast<float>(e2m1(j % 16)) * 0.25f;
  std::vector<uint8_t> q(row_bytes(DType::MXFP4, 64));
  std::vector<float> y(64);
  convert_from_f32(x.data(), DType::MXFP4, q.data(), 64);
  convert_to_f32(DType::MXFP4, q.data(), y.data(), 64);
  for (int j = 0; j < 64; ++j) EXPECT_EQ(y[j], x[j]) << j;

  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> g(32 * 64);
  for (auto& v : g) v = nd(rng);
  q.resize(row_bytes(DType::MXFP4, int64_t(g.size())));
  y.resize(g.size());
  convert_from_f32(g.data(), DType::MXFP4, q.data(), int64_t(g.size()));
  convert_to_f32(DType::MXFP4, q.data(), y.data(), int64_t(g.size()));
  double err = 0, energy = 0;
  for (size_t b = 0; b < g.size(); b += 32) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(g[b + j]));
    const float scale = std::ldexp(1.0f, static_cast<int>(std::floor(std::log2(amax))) - 2);
    for (int j = 0; j < 32; ++j) {
      // The widest gap of the grid is 2 (between 4 and 6) times the scale; above 6 it saturates.
      const float bound = std::max(scale, std::fabs(g[b + j]) - 6 * scale);
      EXPECT_LE(std::fabs(y[b + j] - g[b + j]), bound) << b + j;
      err += double(y[b + j] - g[b + j]) * (y[b + j] - g[b + j]);
      energy += double(g[b + j]) * g[b + j];
    }
  }
  EXPECT_LT(std::sqrt(err / energy), 0.16);  // measured ~0.12 (coarser than iq4_nl's ~0.09)
}

// A GGUF file with one mxfp4 tensor "w.mx" of dims {64, 2} (4 blocks, 68 bytes).
std::vector<uint8_t> mxfp4_file() {
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::of_string("llama"));
  std::vector<uint8_t> data(68);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i % 17 == 0 ? 127 : i * 7);
  w.add_tensor("w.mx", ggml_type_id(DType::MXFP4), {64, 2}, data);
  const std::string path = temp_path("mxfp4-one-tensor.gguf");
  w.write(path);
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string rejection(const std::vector<uint8_t>& bytes) {
  try {
    (void)gguf::File::from_bytes(bytes);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Mxfp4, MalformedTensorsAreRefusedNamingTheTensor) {
  const std::vector<uint8_t> good = mxfp4_file();
  const gguf::File parsed = gguf::File::from_bytes(good);
  ASSERT_EQ(parsed.tensors().size(), 1u);
  EXPECT_EQ(parsed.tensors()[0].n_bytes, 68u);  // 4 blocks of 17 bytes
  EXPECT_EQ(parsed.tensors()[0].type, 39u);

  // A row of 48 values is not whole 32-value blocks: the header's dims[0] patched from 64 to 48.
  const std::string name = "w.mx";
  auto at = std::search(good.begin(), good.end(), name.begin(), name.end());
  ASSERT_NE(at, good.end());
  const size_t dim0 = size_t(at - good.begin()) + name.size() + 4;  // after the name and n_dims
  uint64_t d;
  std::memcpy(&d, &good[dim0], 8);
  ASSERT_EQ(d, 64u);
  std::vector<uint8_t> bad = good;
  d = 48;
  std::memcpy(&bad[dim0], &d, 8);
  std::string err = rejection(bad);
  EXPECT_NE(err.find("w.mx"), std::string::npos) << err;
  EXPECT_NE(err.find("mxfp4"), std::string::npos) << err;

  // Data cut inside the last 17-byte block.
  const uint64_t end = good.size() - (96 - 68);  // the writer pads the 68 bytes to 96
  bad.assign(good.begin(), good.begin() + int64_t(end) - 1);
  err = rejection(bad);
  EXPECT_NE(err.find("w.mx"), std::string::npos) << err;

  // The writer refuses bytes that are not the blocks the shape needs.
  gguf::Writer w;
  EXPECT_THROW(w.add_tensor("w.short", ggml_type_id(DType::MXFP4), {64, 2}, std::vector<uint8_t>(67)), Error);
}

TinyModel mxfp4_model() {
  TinyModel tm;
  tm.type = DType::MXFP4;
  return tm;
}

TEST(Mxfp4, ModelRunsLikeItsDequantisedCopy) {
  const std::string path = make_model(mxfp4_model());
  const auto model = Model::load(path);
  EXPECT_EQ(model->layers()[0].wq.type, DType::MXFP4);
  EXPECT_EQ(model->layers()[1].w_down.type, DType::MXFP4);
  // The same weights as f32: rewrite every mxfp4 tensor dequantised.
  const gguf::File f = gguf::File::open(path);
  gguf::Writer w;
  for (const auto& e : f.metadata()) w.set(e.key, e.value);
  for (const auto& t : f.tensors()) {
    const DType from = dtype_from_ggml(t.type);
    std::vector<float> v(t.n_elements);
    convert_to_f32(from, f.tensor_data(t), v.data(), int64_t(t.n_elements));
    std::vector<uint8_t> bytes(v.size() * 4);
    std::memcpy(bytes.data(), v.data(), bytes.size());
    w.add_tensor(t.name, ggml_type_id(DType::F32), t.dims, std::move(bytes));
  }
  const std::string back = temp_path("mxfp4-dequantised.gguf");
  w.write(back);
  const auto ref = Model::load(back);
  ThreadPool pool(2);
  const std::vector<int32_t> tokens = {1, 50, 99, 7, 200, 31, 5, 18, 77};
  // Prefill (int8 GEMM) and decode (int8 dot) both: every token's logits.
  auto logits = [&](const Model& m, bool one_by_one) {
    PagedKvCache cache(kv_shape(m.config()), 64);
    Forward fwd(m, 16);
    std::vector<float> out;
    if (one_by_one) {
      for (size_t i = 0; i < tokens.size(); ++i) {
        const float* l = fwd.run(&tokens[i], 1, int(i), cache, pool, false);
        out.assign(l, l + m.config().n_vocab);
      }
    } else {
      const float* l = fwd.run(tokens.data(), int(tokens.size()), 0, cache, pool, false);
      out.assign(l, l + m.config().n_vocab);
    }
    return out;
  };
  for (bool one_by_one : {false, true}) {
    const auto a = logits(*model, one_by_one), b = logits(*ref, one_by_one);
    double err = 0, scale = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      err = std::max(err, double(std::abs(a[i] - b[i])));
      scale = std::max(scale, double(std::abs(b[i])));
    }
    // Only the activations' 8-bit rounding differs (a few percent on this random model).
    EXPECT_LT(err / scale, 0.08) << (one_by_one ? "decode" : "prefill");
    EXPECT_GT(scale, 0.0);
  }
}

TEST(Mxfp4, QuantizeCopiesMxfp4TensorsByteForByteWhateverThePreset) {
  const std::string in_path = make_model(mxfp4_model());
  const gguf::File in = gguf::File::open(in_path);
  ThreadPool pool(2);
  for (const char* preset : {"q4_k_m", "q8_0", "mxfp4"}) {
    const std::string out_path = temp_path(std::string("mxfp4-kept-") + preset + ".gguf");
    QuantizeOptions options;
    options.preset = preset;  // no --allow-requantize: mxfp4 input is not requantized, so not refused
    int kept = 0;
    (void)quantize_file(in_path, out_path, options, pool, [&](const QuantizedTensor& t) { kept += !t.quantized; });
    const gguf::File out = gguf::File::open(out_path);
    ASSERT_EQ(out.tensors().size(), in.tensors().size());
    EXPECT_EQ(kept, int(in.tensors().size())) << preset;
    for (const auto& t : in.tensors()) {
      const gguf::TensorInfo* o = out.find_tensor(t.name);
      ASSERT_NE(o, nullptr) << t.name;
      EXPECT_EQ(o->type, t.type) << t.name;
      ASSERT_EQ(o->n_bytes, t.n_bytes) << t.name;
      EXPECT_EQ(0, std::memcmp(out.tensor_data(*o), in.tensor_data(t), t.n_bytes)) << preset << " " << t.name;
    }
  }
}

TEST(Mxfp4, QuantizePresetsWriteMxfp4) {
  TinyModel tm;
  tm.type = DType::F32;
  const std::string in_path = make_model(tm);
  ThreadPool pool(2);
  const std::string out_path = temp_path("mxfp4-preset.gguf");
  QuantizeOptions options;
  options.preset = "mxfp4";
  (void)quantize_file(in_path, out_path, options, pool);
  const gguf::File out = gguf::File::open(out_path);
  EXPECT_EQ(out.get_uint("general.file_type"), 38u);
  EXPECT_EQ(out.find_tensor("blk.0.attn_q.weight")->type, 39u);
  EXPECT_EQ(out.find_tensor("blk.1.ffn_down.weight")->type, 39u);
  EXPECT_EQ(out.find_tensor("token_embd.weight")->type, 39u);
  EXPECT_EQ(out.find_tensor("output.weight")->type, ggml_type_id(DType::Q8_0));
  EXPECT_EQ(out.find_tensor("blk.0.attn_norm.weight")->type, ggml_type_id(DType::F32));
  // The stored bytes are the quantiser's on the input rows.
  const gguf::File in = gguf::File::open(in_path);
  const gguf::TensorInfo& src = *in.find_tensor("blk.0.attn_q.weight");
  std::vector<uint8_t> want(row_bytes(DType::MXFP4, int64_t(src.n_elements)));
  convert_from_f32(reinterpret_cast<const float*>(in.tensor_data(src)), DType::MXFP4, want.data(),
                   int64_t(src.n_elements));
  const gguf::TensorInfo& q = *out.find_tensor("blk.0.attn_q.weight");
  ASSERT_EQ(q.n_bytes, want.size());
  EXPECT_EQ(0, std::memcmp(out.tensor_data(q), want.data(), want.size()));

  // mxfp4_moe (llama.cpp's MXFP4_MOE): a dense model has no expert stacks, so every matrix is q8_0.
  options.preset = "mxfp4_moe";
  const std::string moe_path = temp_path("mxfp4-moe-preset.gguf");
  (void)quantize_file(in_path, moe_path, options, pool);
  const gguf::File moe = gguf::File::open(moe_path);
  EXPECT_EQ(moe.find_tensor("blk.0.attn_q.weight")->type, ggml_type_id(DType::Q8_0));
  EXPECT_EQ(moe.find_tensor("output.weight")->type, ggml_type_id(DType::Q8_0));
}

}  // namespace
}  // namespace kvslim
