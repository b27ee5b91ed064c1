// Phi-3 and SmolLM3: the engine's forward pass against a plain double-precision reference written
// here from the architectures' definitions (llama.cpp's src/models/phi3.cpp and smollm3.cpp):
// fused attn_qkv and gate/up tensors split by rows, partial NEOX RoPE with the long or short
// factor tensor and the attention factor, SmolLM3's NoPE layers. Also init-model's round trip
// (--arch, --weight-std) and the errors for bad files.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "cli_helpers.h"
#include "kv/paged_cache.h"
#include "model/forward.h"
#include "model/model.h"
#include "forward_checks.h"
#include "naive_reference.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim {
namespace {

using testing::edited_copy;
using testing::engine_logits;
using testing::expect_load_error;
using testing::relative_error;
using testing::rmsnorm;
using testing::test_tokens;
using testing::Vec;

// ---- the reference: every key read from the file here, every weight in double ----

struct Matrix {
  Vec data;
  int64_t rows = 0, cols = 0;
  Vec row_range(int64_t first, int64_t count, const Vec& x) const {  // rows [first, first+count) times x
    Vec y(count, 0.0);
    for (int64_t r = 0; r < count; ++r)
      for (int64_t c = 0; c < cols; ++c) y[r] += data[(first + r) * cols + c] * x[c];
    return y;
  }
  Vec times(const Vec& x) const { return row_range(0, rows, x); }
};

Matrix read(const gguf::File& f, const std::string& name) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t) return {};
  EXPECT_EQ(t->type, ggml_type_id(DType::F32)) << name << ": the reference reads f32 files";
  Matrix m;
  m.cols = int64_t(t->dims[0]);
  m.rows = t->dims.size() > 1 ? int64_t(t->dims[1]) : 1;
  const float* p = reinterpret_cast<const float*>(f.tensor_data(*t));
  m.data.assign(p, p + m.rows * m.cols);
  return m;
}

struct RefConfig {
  std::string arch;
  int layers, dim, ffn, heads, kv_heads, head_dim, n_rot, ctx, original_ctx;
  double eps, base, attn_factor;
};

RefConfig read_config(const gguf::File& f) {
  RefConfig c;
  c.arch = f.get_string("general.architecture");
  const std::string p = c.arch + ".";
  c.layers = int(f.get_uint(p + "block_count"));
  c.dim = int(f.get_uint(p + "embedding_length"));
  c.ffn = int(f.get_uint(p + "feed_forward_length"));
  c.heads = int(f.get_uint(p + "attention.head_count"));
  c.kv_heads = int(f.get_uint(p + "attention.head_count_kv"));
  c.head_dim = c.dim / c.heads;
  c.n_rot = int(f.get_uint(p + "rope.dimension_count"));
  c.ctx = int(f.get_uint(p + "context_length"));
  c.original_ctx = int(f.get_uint_opt(p + "rope.scaling.original_context_length").value_or(c.ctx));
  c.eps = f.get_float_opt(p + "attention.layer_norm_rms_epsilon").value_or(1e-5);
  c.base = f.get_float_opt(p + "rope.freq_base").value_or(10000.0);
  c.attn_factor = f.get_float_opt(p + "rope.scaling.attn_factor").value_or(1.0);
  return c;
}

// Rotates the first n_rot values of a head: pairs (i, i + n_rot/2) for NEOX (phi3), (2i, 2i+1)
// otherwise (smollm3); the angle divided by the factor, both coordinates scaled by attn_factor.
void rotate(double* head, const RefConfig& c, int64_t pos, bool neox, const Vec& factors) {
  const int half = c.n_rot / 2;
  for (int i = 0; i < half; ++i) {
    double angle = double(pos) * std::pow(c.base, -2.0 * i / c.n_rot);
    if (!factors.empty()) angle /= factors[i];
    const double cs = std::cos(angle) * c.attn_factor, sn = std::sin(angle) * c.attn_factor;
    double& a = neox ? head[i] : head[2 * i];
    double& b = neox ? head[i + half] : head[2 * i + 1];
    const double a0 = a, b0 = b;
    a = a0 * cs - b0 * sn;
    b = a0 * sn + b0 * cs;
  }
}

// Logits of every position, [n][n_vocab], for a context of n_ctx tokens (which picks Phi-3's
// long or short factors: long when n_ctx exceeds the original context).
std::vector<Vec> reference_logits(const std::string& path, const std::vector<int32_t>& tokens, int n_ctx) {
  const gguf::File f = gguf::File::open(path);
  const RefConfig c = read_config(f);
  const bool phi3 = c.arch == "phi3", neox = phi3;
  const int q_dim = c.heads * c.head_dim, kv_dim = c.kv_heads * c.head_dim, group = c.heads / c.kv_heads;
  const Matrix embd = read(f, "token_embd.weight");
  Matrix out = read(f, "output.weight");
  if (out.rows == 0) out = embd;
  const Vec factors = read(f, n_ctx > c.original_ctx ? "rope_factors_long.weight" : "rope_factors_short.weight").data;
  const size_t n = tokens.size();
  std::vector<Vec> x(n);
  for (size_t t = 0; t < n; ++t)
    x[t] = Vec(embd.data.begin() + tokens[t] * c.dim, embd.data.begin() + (tokens[t] + 1) * c.dim);

  for (int l = 0; l < c.layers; ++l) {
    auto w = [&](const char* name) { return read(f, fmt::format("blk.{}.{}", l, name)); };
    const Matrix attn_norm = w("attn_norm.weight"), wo = w("attn_output.weight"), ffn_norm = w("ffn_norm.weight"),
                 wd = w("ffn_down.weight"), wu = w("ffn_up.weight");
    const Matrix qkv = phi3 ? w("attn_qkv.weight") : Matrix{};
    const Matrix wq = phi3 ? Matrix{} : w("attn_q.weight"), wk = phi3 ? Matrix{} : w("attn_k.weight"),
                 wv = phi3 ? Matrix{} : w("attn_v.weight"), wg = phi3 ? Matrix{} : w("ffn_gate.weight");
    // llama.cpp's smollm3 graph: use_rope = (il + 1) % 4 != 0.
    const bool rope = phi3 || (l + 1) % 4 != 0;
    std::vector<Vec> q(n), k(n), v(n);
    for (size_t t = 0; t < n; ++t) {
      const Vec h = rmsnorm(x[t], attn_norm.data.data(), c.eps);
      q[t] = phi3 ? qkv.row_range(0, q_dim, h) : wq.times(h);
      k[t] = phi3 ? qkv.row_range(q_dim, kv_dim, h) : wk.times(h);
      v[t] = phi3 ? qkv.row_range(q_dim + kv_dim, kv_dim, h) : wv.times(h);
      if (!rope) continue;
      for (int hh = 0; hh < c.heads; ++hh) rotate(&q[t][hh * c.head_dim], c, int64_t(t), neox, factors);
      for (int hh = 0; hh < c.kv_heads; ++hh) rotate(&k[t][hh * c.head_dim], c, int64_t(t), neox, factors);
    }
    for (size_t t = 0; t < n; ++t) {
      Vec attn(q_dim, 0.0);
      for (int hh = 0; hh < c.heads; ++hh) {
        const int kvh = hh / group;
        Vec p(t + 1);
        double mx = -1e300, sum = 0;
        for (size_t j = 0; j <= t; ++j) {
          double s = 0;
          for (int d = 0; d < c.head_dim; ++d) s += q[t][hh * c.head_dim + d] * k[j][kvh * c.head_dim + d];
          p[j] = s / std::sqrt(double(c.head_dim));
          mx = std::max(mx, p[j]);
        }
        for (double& e : p) sum += e = std::exp(e - mx);
        for (size_t j = 0; j <= t; ++j)
          for (int d = 0; d < c.head_dim; ++d) attn[hh * c.head_dim + d] += p[j] / sum * v[j][kvh * c.head_dim + d];
      }
      const Vec o = wo.times(attn);
      for (int i = 0; i < c.dim; ++i) x[t][i] += o[i];
      const Vec h = rmsnorm(x[t], ffn_norm.data.data(), c.eps);
      // Phi-3's ffn_up holds the gate rows, then the up rows.
      const Vec g = phi3 ? wu.row_range(0, c.ffn, h) : wg.times(h);
      const Vec u = phi3 ? wu.row_range(c.ffn, c.ffn, h) : wu.times(h);
      Vec act(c.ffn);
      for (int i = 0; i < c.ffn; ++i) act[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      const Vec down = wd.times(act);
      for (int i = 0; i < c.dim; ++i) x[t][i] += down[i];
    }
  }
  const Vec out_norm = read(f, "output_norm.weight").data;
  std::vector<Vec> logits(n);
  for (size_t t = 0; t < n; ++t) logits[t] = out.times(rmsnorm(x[t], out_norm.data(), c.eps));
  return logits;
}

// ---- the engine ----

// A 4-layer f32 model (SmolLM3's fourth layer is its NoPE layer), context 512 (Phi-3: trained on
// 256, the long factors beyond it), weights spread so that the logits are far from flat; the
// built-in byte vocabulary. The same as `kvslim init-model --arch ARCH --layers 4 --dim 64
// --heads 4 --kv-heads 2 --ffn 96 --type f32 --ctx 512 --weight-std 0.08 --seed 11`.
RandomModelSpec tiny_spec(Arch arch, float weight_std) {
  RandomModelSpec spec;
  spec.config.arch = arch;
  spec.config.n_layers = 4;
  spec.config.dim = 64;
  spec.config.n_heads = 4;
  spec.config.n_kv_heads = 2;
  spec.config.ffn_dim = 96;
  spec.config.context_length = 512;
  spec.type = DType::F32;
  spec.weight_std = weight_std;
  spec.seed = 11;
  if (arch == Arch::Gemma3) {
    // Sliding layers of 6 tokens (every second layer global): the 16 tokens reach past them.
    spec.sliding_window = 6;
    spec.swa_period = 2;
  }
  if (arch == Arch::Qwen3Moe || arch == Arch::GptOss) {  // 8 experts of width 96, 2 per token
    spec.config.moe.n_experts = 8;
    spec.config.moe.n_experts_used = 2;
  }
  if (arch == Arch::GptOss) spec.sliding_window = 6;  // its even layers; the 16 tokens reach past it
  return spec;
}

std::string tiny(Arch arch, float weight_std = 0.08f) {
  const std::string path = testing::temp_path(fmt::format("{}-{}.gguf", arch_name(arch), weight_std));
  if (!std::filesystem::exists(path)) write_random_model(tiny_spec(arch, weight_std), "", path);
  return path;
}

// f32 rounding is all that separates engine and reference (the bound of test_forward.cpp).
constexpr double kTolerance = 1e-4;

TEST(Phi3, LogitsAgreeWithReferenceWithShortAndLongFactors) {
  const std::string path = tiny(Arch::Phi3);
  const auto model = Model::load(path);
  const auto tokens = test_tokens(24, model->config().n_vocab);
  for (int n_ctx : {256, 512}) {  // <= the original context: short factors; beyond it: long
    const auto want = reference_logits(path, tokens, n_ctx);
    for (int block : {1, 7, 24})
      EXPECT_LT(relative_error(engine_logits(*model, tokens, block, 2, n_ctx), want), kTolerance)
          << "n_ctx " << n_ctx << " block " << block;
  }
  // The two factor sets give different functions, so the test above tells them apart.
  EXPECT_GT(relative_error(engine_logits(*model, tokens, 24, 2, 256), reference_logits(path, tokens, 512)), 1e-2);
}

TEST(SmolLM3, LogitsAgreeWithReferenceWithNoPeLayers) {
  const std::string path = tiny(Arch::SmolLM3);
  const auto model = Model::load(path);
  EXPECT_TRUE(model->config().layer_has_rope(2));
  EXPECT_FALSE(model->config().layer_has_rope(3));
  const auto tokens = test_tokens(24, model->config().n_vocab);
  const auto want = reference_logits(path, tokens, 0);
  for (int block : {1, 5, 24}) EXPECT_LT(relative_error(engine_logits(*model, tokens, block, 2, 0), want), kTolerance);
}

// ---- against logits recorded from llama.cpp (tests/data/llama-cpp-logits.md) ----

uint64_t fnv1a(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t h = 0xcbf29ce484222325ull;
  for (char ch; in.get(ch);) h = (h ^ uint8_t(ch)) * 0x100000001b3ull;
  return h;
}

struct Recorded {
  std::string arch;
  uint64_t bytes = 0, hash = 0;
  std::vector<int32_t> tokens;
  std::map<int, std::vector<double>> logits;  // by position
};

std::vector<Recorded> read_recorded(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::vector<Recorded> out;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind == "model") {
      out.emplace_back();
      std::string bytes_word, hash_word;
      words >> out.back().arch >> bytes_word >> out.back().bytes >> hash_word >> std::hex >> out.back().hash;
    } else if (kind == "tokens") {
      for (std::string id; std::getline(words >> std::ws, id, ',');) out.back().tokens.push_back(std::stoi(id));
    } else if (kind == "logits") {
      int pos;
      words >> pos;
      auto& row = out.back().logits[pos];
      for (double v; words >> v;) row.push_back(v);
    }
  }
  return out;
}

// Both programs compute in f32 from the same f32 weights; only the order of the sums differs
// (ggml's blocked dot products and softmax against kvslim's kernels), about 1e-6 of a logit per
// layer. 1e-4 of the largest logit, the engine-vs-double bound above, leaves room for that and
// is 100 times below what a wrong split, factor set or NoPE layer moves (the short/long check in
// Phi3.LogitsAgreeWithReferenceWithShortAndLongFactors: > 1e-2).
TEST(LlamaCppGolden, LogitsMatchThoseRecordedFromLlamaCpp) {
  const auto recorded = read_recorded(KVSLIM_SOURCE_DIR "/tests/data/llama-cpp-logits.txt");
  ASSERT_EQ(recorded.size(), 7u);
  for (const Recorded& r : recorded) {
    SCOPED_TRACE(r.arch);
    const std::string path = testing::temp_path("golden-" + r.arch + ".gguf");
    write_random_model(tiny_spec(arch_from_name(r.arch), 0.08f), "", path);
    // The file must be the one llama.cpp read: a changed writer needs a new recording.
    ASSERT_EQ(std::filesystem::file_size(path), r.bytes);
    ASSERT_EQ(fnv1a(path), r.hash);
    const auto model = Model::load(path);
    const int n_vocab = model->config().n_vocab;
    const std::vector<float> got = engine_logits(*model, r.tokens, int(r.tokens.size()), 2, 512);
    ASSERT_FALSE(r.logits.empty());
    double err = 0, scale = 0;
    for (const auto& [pos, want] : r.logits) {
      ASSERT_EQ(int(want.size()), n_vocab);
      const float* row = got.data() + size_t(pos) * n_vocab;
      for (int i = 0; i < n_vocab; ++i) {
        err = std::max(err, std::abs(row[i] - want[i]));
        scale = std::max(scale, std::abs(want[i]));
      }
      EXPECT_EQ(std::max_element(row, row + n_vocab) - row, std::max_element(want.begin(), want.end()) - want.begin())
          << "position " << pos;
    }
    // gemma3's GELU: llama.cpp's CPU backend looks it up in a table indexed by the input rounded
    // to f16 and stores the result as f16 (GGML_GELU_FP16), relative steps of 2^-11; kvslim
    // computes it in f32. Through the FFN that moved these logits by 4.1e-4 of the largest one.
    EXPECT_LT(err / scale, r.arch == "gemma3" ? 1e-3 : 1e-4);
  }
}

TEST(InitModel, Phi3FileHasFusedTensorsPartialRopeAndLongRopeKeys) {
  const auto model = Model::load(tiny(Arch::Phi3));
  const gguf::File& f = model->file();
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.arch, Arch::Phi3);
  EXPECT_EQ(c.n_rot, 12);  // 3/4 of the 16-wide heads
  EXPECT_EQ(c.rope_original_context, 256);
  EXPECT_NEAR(c.rope_attn_factor, std::sqrt(1 + std::log(2.0) / std::log(256.0)), 1e-6);
  ASSERT_NE(f.find_tensor("blk.0.attn_qkv.weight"), nullptr);
  EXPECT_EQ(f.find_tensor("blk.0.attn_qkv.weight")->dims, (std::vector<uint64_t>{64, 64 + 2 * 32}));
  EXPECT_EQ(f.find_tensor("blk.0.ffn_up.weight")->dims, (std::vector<uint64_t>{64, 2 * 96}));
  EXPECT_EQ(f.find_tensor("blk.0.attn_q.weight"), nullptr);
  EXPECT_EQ(f.find_tensor("blk.0.ffn_gate.weight"), nullptr);
  EXPECT_EQ(f.find_tensor("rope_factors_long.weight")->dims, (std::vector<uint64_t>{6}));
}

// --weight-std sets the spread of every matrix: the sample standard deviation of a large one
// lands within 2% of it (uniform entries: the estimate's relative error is ~1/sqrt(n) = 0.3%).
TEST(InitModel, WeightStdSetsTheSpreadOfTheMatrices) {
  for (float std : {0.02f, 0.3f}) {
    const gguf::File f = gguf::File::open(tiny(Arch::SmolLM3, std));
    const Matrix m = read(f, "blk.1.ffn_down.weight");
    double ss = 0;
    for (double v : m.data) ss += v * v;
    EXPECT_NEAR(std::sqrt(ss / double(m.data.size())), std, 0.02 * std);
  }
}

TEST(InitModel, CommandLineWritesEveryArchitecture) {
  for (const char* arch : {"llama", "qwen2", "qwen3", "phi3", "smollm3"}) {
    const std::string out = testing::temp_path(fmt::format("cli-{}.gguf", arch));
    const auto r =
        testing::run(fmt::format("init-model --arch {} --layers 4 --dim 64 --heads 4 --kv-heads 2 --ffn 64 "
                                 "--weight-std 0.1 --vocab-from {} -o {}",
                                 arch, testing::tiny_vocab(), out));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_STREQ(arch_name(Model::load(out)->config().arch), arch);
  }
  testing::expect_clean_error(testing::run("init-model --arch gemma7 -o " + testing::temp_path("x.gguf")),
                              "unsupported architecture 'gemma7' (supported: llama, qwen2, qwen3, phi3, smollm3");
}

// ---- bad files: a copy of a good one with one tensor changed or left out ----

TEST(Phi3, FusedTensorOfTheWrongShapeIsNamed) {
  const std::string path =
      edited_copy(tiny(Arch::Phi3), "short-qkv.gguf", {}, [](const auto& t, auto& dims, auto& bytes) {
        if (t.name == "blk.1.attn_qkv.weight") {  // one KV width short
          dims[1] -= 32;
          bytes.resize(dims[0] * dims[1] * sizeof(float));
        }
        return true;
      });
  expect_load_error(path, "tensor 'blk.1.attn_qkv.weight' has shape [64, 96], expected [64, 128]");
  const std::string up = edited_copy(tiny(Arch::Phi3), "short-up.gguf", {}, [](const auto& t, auto& dims, auto& bytes) {
    if (t.name == "blk.0.ffn_up.weight") {  // the unfused size
      dims[1] = 96;
      bytes.resize(dims[0] * dims[1] * sizeof(float));
    }
    return true;
  });
  expect_load_error(up, "tensor 'blk.0.ffn_up.weight' has shape [64, 96], expected [64, 192]");
}

TEST(Phi3, MissingRopeFactorTensorIsNamed) {
  const std::string no_short = edited_copy(tiny(Arch::Phi3), "no-short.gguf", {}, [](const auto& t, auto&, auto&) {
    return t.name != "rope_factors_short.weight";
  });
  expect_load_error(no_short, "missing tensor 'rope_factors_short.weight'");
  // Neither: the file says it was trained on less than its context, so it needs the long factors.
  const std::string neither = edited_copy(tiny(Arch::Phi3), "no-factors.gguf", {}, [](const auto& t, auto&, auto&) {
    return t.name.rfind("rope_factors_", 0) != 0;
  });
  expect_load_error(neither, "missing tensor 'rope_factors_long.weight'");
}

TEST(Phi3, UnsupportedArchitectureListsTheSupportedOnes) {
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::of_string("phi2"));
  const std::string path = testing::temp_path("phi2.gguf");
  w.write(path);
  expect_load_error(
      path,
      "unsupported architecture 'phi2' (supported: llama, qwen2, qwen3, phi3, smollm3, gemma3, qwen3moe, gpt-oss)");
}

}  // namespace
}  // namespace kvslim
