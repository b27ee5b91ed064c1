// Gemma 3: the engine's forward pass against a naive double-precision reference written here
// (embeddings scaled by sqrt(dim), Q/K and post norms, GELU-tanh, sliding-window mask, both RoPE
// bases, linear scaling of the global layers, soft-capped logits), the layer pattern read as
// llama.cpp reads it, local layers that never hold more than their window, presses that govern
// the global layers only, and the errors for files whose metadata contradicts their tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "engine/kv_layers_json.h"
#include "engine/session.h"
#include "kv/paged_cache.h"
#include "model/forward.h"
#include "model/model.h"
#include "press/registry.h"
#include "forward_checks.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim {
namespace {

using testing::edited_copy;
using testing::expect_load_error;
using testing::relative_error;
using testing::test_tokens;
using testing::Vec;
using testing::without;

// A 4-layer gemma3 whose layers 0 and 2 are local (period 2) with a window of 5 tokens.
constexpr int kWindow = 5;

std::string gemma3_model(int swa_period = 2, int window = kWindow, int layers = 4, float softcap = 3.0f) {
  const std::string path =
      testing::temp_path(fmt::format("gemma3-{}-{}-{}-{}.gguf", swa_period, window, layers, softcap));
  if (std::filesystem::exists(path)) return path;
  RandomModelSpec spec;
  ModelConfig& c = spec.config;
  c.arch = Arch::Gemma3;
  c.n_layers = layers;
  c.dim = 64;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_dim = 96;
  c.context_length = 256;
  c.rope_base = 1000000.0f;  // the global layers' base; the local ones use 10000
  c.rope_freq_scale = 0.5f;  // rope.scaling.factor 2 on the global layers
  c.final_logit_softcap = softcap;
  spec.type = DType::F32;
  spec.tied_output = true;
  spec.sliding_window = window;
  spec.swa_period = swa_period;
  spec.seed = 11;
  write_random_model(spec, testing::tiny_vocab(), path);
  return path;
}

// ---- the reference: plain loops over double copies of the weights ----

Vec tensor(const gguf::File& f, const std::string& name) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t) throw std::runtime_error("reference: no tensor " + name);
  EXPECT_EQ(t->type, uint32_t(gguf::TensorType::F32)) << name;
  const float* p = reinterpret_cast<const float*>(f.tensor_data(*t));
  return Vec(p, p + t->n_elements);
}

Vec matvec(const Vec& w, const Vec& x) {  // w is [rows][x.size()]
  Vec y(w.size() / x.size(), 0.0);
  for (size_t r = 0; r < y.size(); ++r)
    for (size_t c = 0; c < x.size(); ++c) y[r] += w[r * x.size() + c] * x[c];
  return y;
}

Vec rmsnorm(const Vec& x, const double* w, size_t n, double eps) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double inv = 1.0 / std::sqrt(ss / double(n) + eps);
  Vec y(n);
  for (size_t i = 0; i < n; ++i) y[i] = x[i] * inv * w[i];
  return y;
}

// Normalises each head of `x` in place, then rotates its split halves (NEOX pairing).
void norm_and_rope(Vec& x, int heads, int hd, const Vec& norm, double eps, int64_t pos, double base, double scale) {
  for (int h = 0; h < heads; ++h) {
    const Vec head(x.begin() + h * hd, x.begin() + (h + 1) * hd);
    Vec v = rmsnorm(head, norm.data(), size_t(hd), eps);
    for (int i = 0; i < hd / 2; ++i) {
      const double a = double(pos) * scale * std::pow(base, -2.0 * i / hd);
      const double x0 = v[i], x1 = v[i + hd / 2];
      v[i] = x0 * std::cos(a) - x1 * std::sin(a);
      v[i + hd / 2] = x0 * std::sin(a) + x1 * std::cos(a);
    }
    std::copy(v.begin(), v.end(), x.begin() + h * hd);
  }
}

// Logits of every position of `tokens` ([n][n_vocab]), everything read from the file's own keys.
std::vector<Vec> reference_logits(const std::string& path, const std::vector<int32_t>& tokens) {
  const gguf::File f = gguf::File::open(path);
  const int layers = int(f.get_uint("gemma3.block_count")), dim = int(f.get_uint("gemma3.embedding_length"));
  const int heads = int(f.get_uint("gemma3.attention.head_count"));
  const int kv_heads = int(f.get_uint("gemma3.attention.head_count_kv"));
  const int hd = dim / heads, group = heads / kv_heads;
  const double eps = f.get_float("gemma3.attention.layer_norm_rms_epsilon");
  const double base_global = f.get_float("gemma3.rope.freq_base");
  const double scale_global = 1.0 / f.get_float_opt("gemma3.rope.scaling.factor").value_or(1.0);
  const double softcap = f.get_float_opt("gemma3.final_logit_softcapping").value_or(0.0);
  const int window = int(f.get_uint("gemma3.attention.sliding_window"));
  const int period = int(f.get_uint_opt("gemma3.attention.sliding_window_pattern").value_or(6));
  const Vec embd = tensor(f, "token_embd.weight");
  const size_t n = tokens.size();

  std::vector<Vec> x(n);
  for (size_t t = 0; t < n; ++t) {
    x[t] = Vec(embd.begin() + tokens[t] * dim, embd.begin() + (tokens[t] + 1) * dim);
    for (double& v : x[t]) v *= std::sqrt(double(dim));
  }
  for (int l = 0; l < layers; ++l) {
    auto w = [&](const char* name) { return tensor(f, fmt::format("blk.{}.{}", l, name)); };
    const bool local = l % period < period - 1;  // llama.cpp: the last of every `period` layers is global
    const Vec attn_norm = w("attn_norm.weight"), wq = w("attn_q.weight"), wk = w("attn_k.weight"),
              wv = w("attn_v.weight"), wo = w("attn_output.weight"), qn = w("attn_q_norm.weight"),
              kn = w("attn_k_norm.weight"), post_attn = w("post_attention_norm.weight"),
              ffn_norm = w("ffn_norm.weight"), wg = w("ffn_gate.weight"), wu = w("ffn_up.weight"),
              wd = w("ffn_down.weight"), post_ffn = w("post_ffw_norm.weight");
    std::vector<Vec> q(n), k(n), v(n);
    for (size_t t = 0; t < n; ++t) {
      const Vec h = rmsnorm(x[t], attn_norm.data(), size_t(dim), eps);
      q[t] = matvec(wq, h);
      k[t] = matvec(wk, h);
      v[t] = matvec(wv, h);
      const double base = local ? 10000.0 : base_global, scale = local ? 1.0 : scale_global;
      norm_and_rope(q[t], heads, hd, qn, eps, int64_t(t), base, scale);
      norm_and_rope(k[t], kv_heads, hd, kn, eps, int64_t(t), base, scale);
    }
    for (size_t t = 0; t < n; ++t) {
      Vec attn(size_t(heads * hd), 0.0);
      // A local layer's query at t sees (t - window, t]; a global one sees [0, t].
      const size_t first = local && t + 1 > size_t(window) ? t + 1 - size_t(window) : 0;
      for (int h = 0; h < heads; ++h) {
        const int kvh = h / group;
        Vec p(t + 1, 0.0);
        double mx = -1e300, sum = 0;
        for (size_t j = first; j <= t; ++j) {
          for (int d = 0; d < hd; ++d) p[j] += q[t][h * hd + d] * k[j][kvh * hd + d];
          p[j] /= std::sqrt(double(hd));
          mx = std::max(mx, p[j]);
        }
        for (size_t j = first; j <= t; ++j) sum += p[j] = std::exp(p[j] - mx);
        for (size_t j = first; j <= t; ++j)
          for (int d = 0; d < hd; ++d) attn[h * hd + d] += p[j] / sum * v[j][kvh * hd + d];
      }
      const Vec o = rmsnorm(matvec(wo, attn), post_attn.data(), size_t(dim), eps);
      for (int i = 0; i < dim; ++i) x[t][i] += o[i];
      const Vec h = rmsnorm(x[t], ffn_norm.data(), size_t(dim), eps);
      const Vec g = matvec(wg, h), u = matvec(wu, h);
      Vec act(g.size());
      for (size_t i = 0; i < g.size(); ++i)
        act[i] = 0.5 * g[i] * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g[i] + 0.044715 * g[i] * g[i] * g[i]))) * u[i];
      const Vec down = rmsnorm(matvec(wd, act), post_ffn.data(), size_t(dim), eps);
      for (int i = 0; i < dim; ++i) x[t][i] += down[i];
    }
  }
  const Vec out_norm = tensor(f, "output_norm.weight");
  std::vector<Vec> logits(n);
  for (size_t t = 0; t < n; ++t) {
    logits[t] = matvec(embd, rmsnorm(x[t], out_norm.data(), size_t(dim), eps));  // tied output
    if (softcap > 0)
      for (double& z : logits[t]) z = softcap * std::tanh(z / softcap);
  }
  return logits;
}

// max |got - want| / max |want| over the positions given.

TEST(Gemma3, ConfigFollowsLlamaCppDefaultsAndTheStoredPattern) {
  // Period 6 is llama.cpp's default and is left out of the file, as its converter does.
  const std::string default_path = gemma3_model(6, 4, 8);
  const gguf::File f = gguf::File::open(default_path);
  EXPECT_EQ(f.find("gemma3.attention.sliding_window_pattern"), nullptr);
  EXPECT_EQ(f.get_uint("gemma3.attention.sliding_window"), 4u);
  const ModelConfig c = ModelConfig::from_gguf(f);
  EXPECT_EQ(c.layer_window, (std::vector<int>{4, 4, 4, 4, 4, 0, 4, 4}));  // layer 5 global
  EXPECT_FLOAT_EQ(c.rope_base_local, 10000.0f);
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 0.5f);
  EXPECT_FLOAT_EQ(c.attention_scale, 0.25f);  // 1/sqrt(head_dim 16)
  // Period 2 is written, and read back.
  const ModelConfig c2 = ModelConfig::from_gguf(gguf::File::open(gemma3_model()));
  EXPECT_EQ(c2.layer_window, (std::vector<int>{kWindow, 0, kWindow, 0}));
}

// Engine logits for every position: prefill blocks of `block` through a cache that keeps
// everything (the window mask alone restricts the local layers).
std::vector<float> forward_logits(const Model& model, const std::vector<int32_t>& tokens, int block) {
  return testing::engine_logits(model, tokens, block, 2, 0, 4);
}

TEST(Gemma3, ForwardMatchesNaiveReferenceInBlocksAndTokenByToken) {
  const std::string path = gemma3_model();
  const auto model = Model::load(path);
  const auto tokens = test_tokens(23, model->config().n_vocab);
  const std::vector<Vec> want = reference_logits(path, tokens);
  for (int block : {1, 3, 8, 23}) {
    const double err = relative_error(forward_logits(*model, tokens, block), want);
    EXPECT_LT(err, 2e-5) << "block " << block;
  }
  // The mask matters: the same model with every layer global gives other logits.
  std::vector<Vec> unmasked = reference_logits(gemma3_model(2, 200), tokens);
  EXPECT_GT(relative_error(forward_logits(*model, tokens, 8), unmasked), 1e-3);
}

TEST(Gemma3, SessionSlidesLocalLayersAndStillMatchesTheReference) {
  const std::string path = gemma3_model();
  const auto model = Model::load(path);
  const auto tokens = test_tokens(30, model->config().n_vocab);
  const std::vector<Vec> want = reference_logits(path, tokens);
  ThreadPool pool(2);
  EngineOptions options;
  options.batch = 4;
  options.page_tokens = 2;  // windows span pages and drop whole ones
  options.cache_type_k = options.cache_type_v = DType::F32;
  Session session(*model, pool, {.engine = options, .capacity = 64});
  const int n_prompt = 13, n_vocab = model->config().n_vocab;
  // Each local head holds what the next token sees: window - 1 tokens once that many have run;
  // a global head holds every token.
  auto check_sizes = [&](int64_t n_past) {
    for (int l = 0; l < 4; ++l)
      for (int h = 0; h < 2; ++h) {
        const HeadCache& head = session.kv().head(l, h);
        const int64_t want_size = l % 2 == 0 ? std::min<int64_t>(kWindow - 1, n_past) : n_past;
        ASSERT_EQ(head.size(), want_size) << "layer " << l << " after " << n_past;
        ASSERT_EQ(head.position(head.size() - 1), n_past - 1);
      }
  };
  std::vector<std::vector<float>> got;
  session.begin_prefill(std::vector<int32_t>(tokens.begin(), tokens.begin() + n_prompt), 0);
  while (session.prefilling()) {
    session.prefill_step();
    check_sizes(session.n_past());
  }
  got.resize(n_prompt - 1);  // prefill gives only the last position's logits
  got.emplace_back(session.last_logits(), session.last_logits() + n_vocab);
  for (size_t t = n_prompt; t < tokens.size(); ++t) {
    const float* logits = session.decode(tokens[t]);
    check_sizes(session.n_past());
    got.emplace_back(logits, logits + n_vocab);
  }
  double err = 0, scale = 0;
  for (size_t t = n_prompt - 1; t < tokens.size(); ++t)
    for (int i = 0; i < n_vocab; ++i) {
      err = std::max(err, std::abs(got[t][i] - want[t][i]));
      scale = std::max(scale, std::abs(want[t][i]));
    }
  EXPECT_LT(err / scale, 2e-5);
  // The report names the kinds and counts the tokens.
  const nlohmann::json layers = kv_layers_json(session.kv());
  ASSERT_EQ(layers.size(), 4u);
  EXPECT_EQ(layers[0]["kind"], "local");
  EXPECT_EQ(layers[0]["window"], kWindow);
  EXPECT_EQ(layers[0]["tokens"], 2 * (kWindow - 1));
  EXPECT_EQ(layers[1]["kind"], "global");
  EXPECT_EQ(layers[1]["tokens"], 2 * 30);
  EXPECT_GT(layers[1]["bytes"].get<uint64_t>(), layers[0]["bytes"].get<uint64_t>());
}

TEST(Gemma3, ALocalLayerNeverHoldsMoreThanItsWindowBeyondTheBlock) {
  const auto model = Model::load(gemma3_model());
  ThreadPool pool(1);
  // Appends through the cache as the forward pass does, sliding as the session does, and checks
  // every local head after every append: at most window - 1 + block tokens, all inside the window
  // of the block's first query.
  PagedKvCache cache(kv_shape(model->config()), 100, 3);
  const int kv_dim = model->config().kv_dim();
  int64_t pos = 0;
  for (int block : {1, 4, 1, 1, 7, 2, 1, 1, 1, 9, 1}) {
    std::vector<float> k(size_t(block) * kv_dim, 0.5f), v(k);
    std::vector<int64_t> positions(static_cast<size_t>(block), 0);
    for (int i = 0; i < block; ++i) positions[size_t(i)] = pos + i;
    for (int l = 0; l < 4; ++l) {
      cache.append(l, k.data(), v.data(), block, positions.data());
      for (int h = 0; h < 2 && cache.is_local(l); ++h) {
        const HeadCache& head = cache.head(l, h);
        EXPECT_LE(head.size(), kWindow - 1 + block) << "layer " << l << " at " << pos;
        EXPECT_GT(head.position(0), pos - kWindow) << "layer " << l;
      }
    }
    pos += block;
    cache.slide_windows(pos);
    for (int l : {0, 2}) EXPECT_EQ(cache.head(l, 0).size(), std::min<int64_t>(kWindow - 1, pos));
    EXPECT_EQ(cache.head(1, 0).size(), pos);  // global layers keep everything
  }
}

TEST(Gemma3, PressBudgetsApplyToGlobalLayersOnly) {
  const auto model = Model::load(gemma3_model());
  const int64_t n_prompt = 100, budget = 40;
  const auto prompt = test_tokens(int(n_prompt), model->config().n_vocab);
  for (const std::string method : {"snapkv", "streaming_llm", "pyramidkv", "h2o", "knorm"}) {
    ThreadPool pool(2);
    const auto press = make_press(method, {});
    Session session(*model, pool, {.engine = {}, .capacity = 128, .press = press.get(), .budget = budget});
    session.prefill(prompt);
    int64_t global_total = 0;
    for (int l = 0; l < 4; ++l)
      for (int h = 0; h < 2; ++h) {
        const int64_t size = session.kv().head(l, h).size();
        if (l % 2 == 0) {
          EXPECT_EQ(size, kWindow - 1) << method << " touched local layer " << l;
        } else {
          EXPECT_LE(size, method == "pyramidkv" ? 2 * budget : budget) << method << " layer " << l;
          EXPECT_LT(size, n_prompt) << method << " evicted nothing on layer " << l;
          global_total += size;
        }
      }
    EXPECT_LE(global_total, 2 * 2 * budget) << method;  // the budget over the global layers' heads
  }
  // PyramidKV's pyramid spans the two global layers: the first keeps more than the second.
  ThreadPool pool(1);
  const auto pyramid = make_press("pyramidkv", {});
  Session session(*model, pool, {.engine = {}, .capacity = 128, .press = pyramid.get(), .budget = budget});
  session.prefill(prompt);
  EXPECT_GT(session.kv().head(1, 0).size(), session.kv().head(3, 0).size());
}

TEST(Gemma3, EvictionOnALocalLayerIsRefused) {
  const auto model = Model::load(gemma3_model());
  ThreadPool pool(1);
  // A press that tries to evict on every layer.
  struct AllLayers final : Press {
    void end_prefill(PressContext& ctx) override {
      const int32_t first = 0;
      for (int l = 0; l < ctx.cache().n_layers(); ++l) ctx.keep(l, 0, std::span<const int32_t>(&first, 1));
    }
  } press;
  Session session(*model, pool, {.engine = {}, .capacity = 64, .press = &press, .budget = 4});
  try {
    session.prefill(test_tokens(20, model->config().n_vocab));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sliding-window layer"), std::string::npos) << e.what();
  }
}

TEST(Gemma3, RewindBeforeTheWindowIsRefusedAndNearOneWorks) {
  const auto model = Model::load(gemma3_model());
  ThreadPool pool(1);
  Session session(*model, pool, {.engine = {}, .capacity = 64});
  session.prefill(test_tokens(20, model->config().n_vocab));
  EXPECT_TRUE(session.can_rewind(20));
  EXPECT_FALSE(session.can_rewind(19));  // the local layers dropped position 15
  EXPECT_THROW(session.rewind(10), Error);
  EXPECT_TRUE(session.can_rewind(0));
  session.rewind(0);
  EXPECT_EQ(session.kv().total_tokens(), 0);
}

TEST(Gemma3, BadFilesGiveErrorsNamingTheKeyOrTensor) {
  const std::string path = gemma3_model();
  expect_load_error(
      edited_copy(path, "g3-window.gguf",
                  [](gguf::Writer& w) { w.set("gemma3.attention.sliding_window", gguf::Value::of_u32(4096)); }),
      "gemma3.attention.sliding_window");
  expect_load_error(edited_copy(path, "g3-pattern.gguf",
                                [](gguf::Writer& w) {
                                  gguf::Value pattern;
                                  pattern.type = gguf::ValueType::ARRAY;
                                  pattern.array_type = gguf::ValueType::BOOL;
                                  for (int i = 0; i < 3; ++i) pattern.array.push_back(gguf::Value::of_bool(true));
                                  w.set("gemma3.attention.sliding_window_pattern", pattern);
                                }),
                    "gemma3.attention.sliding_window_pattern");
  expect_load_error(
      edited_copy(path, "g3-scaling.gguf",
                  [](gguf::Writer& w) { w.set("gemma3.rope.scaling.type", gguf::Value::of_string("yarn")); }),
      "gemma3.rope.scaling.type");
  expect_load_error(edited_copy(path, "g3-no-post-norm.gguf", {}, without("blk.1.post_ffw_norm.weight")),
                    "blk.1.post_ffw_norm.weight");
  expect_load_error(edited_copy(path, "g3-no-k-norm.gguf", {}, without("blk.0.attn_k_norm.weight")),
                    "blk.0.attn_k_norm.weight");
  // A pattern of one bool per layer is read as it says.
  const std::string bools = edited_copy(path, "g3-bools.gguf", [](gguf::Writer& w) {
    gguf::Value pattern;
    pattern.type = gguf::ValueType::ARRAY;
    pattern.array_type = gguf::ValueType::BOOL;
    for (bool b : {false, true, true, false}) pattern.array.push_back(gguf::Value::of_bool(b));
    w.set("gemma3.attention.sliding_window_pattern", pattern);
  });
  EXPECT_EQ(Model::load(bools)->config().layer_window, (std::vector<int>{0, kWindow, kWindow, 0}));
}

}  // namespace
}  // namespace kvslim
