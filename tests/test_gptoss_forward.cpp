// gpt-oss end to end: the engine's forward pass over a file `init-model --arch gpt-oss` writes,
// against a naive double-precision reference written here from llama.cpp's graph for the
// architecture (llm_build_openai_moe): q/k/v with biases, YaRN RoPE (NeoX pairs), attention with
// one sink logit per head in every softmax and a window on the even layers, the output projection
// with its bias, the post-attention RMSNorm, the router with its bias (top k of the logits, softmax
// over those k), experts with biases and the clamped SwiGLU (alpha 1.702, limit 7).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "forward_checks.h"
#include "kv/paged_cache.h"
#include "model/forward.h"
#include "model/model.h"
#include "naive_reference.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim {
namespace {

using testing::engine_logits;
using testing::matvec;
using testing::relative_error;
using testing::rmsnorm;
using testing::tensor;
using testing::test_tokens;
using testing::Vec;

constexpr int kWindow = 5;

std::string gptoss_model(int layers = 4) {
  testing::TinyModel m;
  m.arch = Arch::GptOss;
  m.layers = layers;
  m.ffn = 32;
  m.experts = 8;
  m.experts_used = 2;
  m.window = kWindow;
  m.seed = 9;
  return testing::make_model(m);
}

// ggml's rope_yarn on NeoX pairs (i, i + hd/2) of every head, from its formula: extrapolated angle
// p base^(-2i/hd), interpolated one freq_scale times that, mixed by the ramp between YaRN's
// correction dims (beta_fast 32, beta_slow 1, ext_factor 1); magnitude 1 + 0.1 ln(1 / freq_scale)
// (llama.cpp's attention factor, mscale(s) / (1 + 0.1 ln s), is 1 for gpt-oss's files).
void yarn(Vec& x, int heads, int hd, int64_t pos, double base, double freq_scale, double original_context) {
  auto corr_dim = [&](double beta) {
    return hd * std::log(original_context / (beta * 2 * M_PI)) / (2 * std::log(base));
  };
  const double low = std::max(0.0, std::floor(corr_dim(32))), high = std::min(hd - 1.0, std::ceil(corr_dim(1)));
  const double mscale = 1 + 0.1 * std::log(1 / freq_scale);
  for (int h = 0; h < heads; ++h) {
    for (int i = 0; i < hd / 2; ++i) {
      const double extrap = double(pos) * std::pow(base, -2.0 * i / hd);
      const double ramp = 1 - std::clamp((i - low) / std::max(0.001, high - low), 0.0, 1.0);
      const double theta = extrap * freq_scale * (1 - ramp) + extrap * ramp;
      double& a = x[size_t(h * hd + i)];
      double& b = x[size_t(h * hd + i + hd / 2)];
      const double x0 = a, x1 = b;
      a = (x0 * std::cos(theta) - x1 * std::sin(theta)) * mscale;
      b = (x0 * std::sin(theta) + x1 * std::cos(theta)) * mscale;
    }
  }
}

Vec plus(Vec a, const Vec& b, size_t offset = 0) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[offset + i];
  return a;
}

// One token through a layer's experts.
Vec reference_moe(const gguf::File& f, int l, const Vec& h, int n_exp, int k, int ffn) {
  auto w = [&](const char* name) { return tensor(f, "blk." + std::to_string(l) + "." + name); };
  const Vec router = w("ffn_gate_inp.weight"), router_bias = w("ffn_gate_inp.bias"), gate = w("ffn_gate_exps.weight"),
            up = w("ffn_up_exps.weight"), down = w("ffn_down_exps.weight"), gate_bias = w("ffn_gate_exps.bias"),
            up_bias = w("ffn_up_exps.bias"), down_bias = w("ffn_down_exps.bias");
  const size_t dim = h.size();
  const Vec logits = plus(matvec(router, h), router_bias);
  std::vector<int> idx(static_cast<size_t>(n_exp));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  double mx = logits[idx[0]], sum = 0;
  for (int j = 0; j < k; ++j) sum += std::exp(logits[idx[j]] - mx);
  Vec out(dim, 0.0);
  for (int j = 0; j < k; ++j) {
    const int e = idx[j];
    const double weight = std::exp(logits[e] - mx) / sum;
    const Vec g = plus(matvec(gate.data() + size_t(e) * ffn * dim, size_t(ffn), h), gate_bias, size_t(e) * ffn);
    const Vec u = plus(matvec(up.data() + size_t(e) * ffn * dim, size_t(ffn), h), up_bias, size_t(e) * ffn);
    Vec act(static_cast<size_t>(ffn));
    for (int i = 0; i < ffn; ++i) {
      const double x = std::min(g[i], 7.0), y = std::clamp(u[i], -7.0, 7.0);
      act[i] = x / (1 + std::exp(-1.702 * x)) * (y + 1);
    }
    const Vec d = plus(matvec(down.data() + size_t(e) * dim * ffn, dim, act), down_bias, size_t(e) * dim);
    for (size_t i = 0; i < dim; ++i) out[i] += weight * d[i];
  }
  return out;
}

// All logits of `tokens` (one sequence from position 0); with_sinks false leaves the sink logits
// out of the softmax, to show that the comparison sees them.
std::vector<Vec> reference_logits(const std::string& path, const std::vector<int32_t>& tokens, bool with_sinks = true) {
  const gguf::File f = gguf::File::open(path);
  auto u = [&](const char* key) { return int(f.get_uint(std::string("gpt-oss.") + key)); };
  const int layers = u("block_count"), dim = u("embedding_length"), heads = u("attention.head_count");
  const int kv_heads = u("attention.head_count_kv"), hd = u("attention.key_length"), group = heads / kv_heads;
  const int n_exp = u("expert_count"), k = u("expert_used_count"), ffn = u("expert_feed_forward_length");
  const int window = u("attention.sliding_window");
  EXPECT_FALSE(f.get_uint_opt("gpt-oss.attention.sliding_window_pattern"));  // llama.cpp's default: even layers
  const double eps = f.get_float("gpt-oss.attention.layer_norm_rms_epsilon");
  const double base = f.get_float("gpt-oss.rope.freq_base"), base_swa = f.get_float("gpt-oss.rope.freq_base_swa");
  EXPECT_EQ(f.get_string("gpt-oss.rope.scaling.type"), "yarn");
  const double freq_scale = 1 / f.get_float("gpt-oss.rope.scaling.factor");
  const double original_context = double(u("rope.scaling.original_context_length"));
  const Vec embd = tensor(f, "token_embd.weight");
  const size_t n = tokens.size();
  std::vector<Vec> x(n);
  for (size_t t = 0; t < n; ++t) x[t] = Vec(embd.begin() + tokens[t] * dim, embd.begin() + (tokens[t] + 1) * dim);
  for (int l = 0; l < layers; ++l) {
    auto w = [&](const char* name) { return tensor(f, "blk." + std::to_string(l) + "." + name); };
    const Vec attn_norm = w("attn_norm.weight"), wq = w("attn_q.weight"), wk = w("attn_k.weight"),
              wv = w("attn_v.weight"), bq = w("attn_q.bias"), bk = w("attn_k.bias"), bv = w("attn_v.bias"),
              wo = w("attn_output.weight"), bo = w("attn_output.bias"), sinks = w("attn_sinks.weight"),
              post_norm = w("post_attention_norm.weight");
    const bool sliding = l % 2 == 0;
    std::vector<Vec> q(n), kk(n), v(n);
    for (size_t t = 0; t < n; ++t) {
      const Vec h = rmsnorm(x[t], attn_norm.data(), eps);
      q[t] = plus(matvec(wq, h), bq);
      kk[t] = plus(matvec(wk, h), bk);
      v[t] = plus(matvec(wv, h), bv);
      yarn(q[t], heads, hd, int64_t(t), sliding ? base_swa : base, freq_scale, original_context);
      yarn(kk[t], kv_heads, hd, int64_t(t), sliding ? base_swa : base, freq_scale, original_context);
    }
    for (size_t t = 0; t < n; ++t) {
      const size_t first = sliding && t + 1 > size_t(window) ? t + 1 - size_t(window) : 0;  // (t - W, t]
      Vec attn(size_t(heads * hd), 0.0);
      for (int hh = 0; hh < heads; ++hh) {
        const int kvh = hh / group;
        Vec p(t + 1, 0.0);
        double mx = with_sinks ? sinks[hh] : -1e300;
        for (size_t j = first; j <= t; ++j) {
          for (int d = 0; d < hd; ++d) p[j] += q[t][hh * hd + d] * kk[j][kvh * hd + d];
          p[j] /= std::sqrt(double(hd));
          mx = std::max(mx, p[j]);
        }
        double sum = with_sinks ? std::exp(sinks[hh] - mx) : 0.0;  // the sink: mass without a value
        for (size_t j = first; j <= t; ++j) sum += p[j] = std::exp(p[j] - mx);
        for (size_t j = first; j <= t; ++j)
          for (int d = 0; d < hd; ++d) attn[hh * hd + d] += p[j] / sum * v[j][kvh * hd + d];
      }
      x[t] = plus(x[t], plus(matvec(wo, attn), bo));
      x[t] = plus(x[t], reference_moe(f, l, rmsnorm(x[t], post_norm.data(), eps), n_exp, k, ffn));
    }
  }
  const Vec out_norm = tensor(f, "output_norm.weight"), output = tensor(f, "output.weight");
  std::vector<Vec> logits(n);
  for (size_t t = 0; t < n; ++t) logits[t] = matvec(output, rmsnorm(x[t], out_norm.data(), eps));
  return logits;
}

TEST(GptOss, ForwardMatchesNaiveReferenceInBlocksAndTokenByToken) {
  const std::string path = gptoss_model();
  const auto model = Model::load(path);
  ASSERT_EQ(model->config().layer_window, (std::vector<int>{kWindow, 0, kWindow, 0}));
  const auto tokens = test_tokens(19, model->config().n_vocab);  // past the window several times
  const std::vector<Vec> want = reference_logits(path, tokens);
  for (int block : {1, 4, 19}) EXPECT_LT(relative_error(engine_logits(*model, tokens, block), want), 1e-4) << block;
  // What the comparison can tell apart: the same model without its sinks is far off.
  EXPECT_GT(relative_error(engine_logits(*model, tokens, 19), reference_logits(path, tokens, false)), 1e-2);
}

TEST(GptOss, ACacheWithoutTheSinksIsRefused) {
  const auto model = Model::load(gptoss_model(2));
  PagedKvCache cache(kv_shape(model->config()), 8);  // from the config alone: no sinks
  Forward forward(*model, 4);
  ThreadPool pool(1);
  const std::vector<int32_t> tokens = test_tokens(4, model->config().n_vocab);
  try {
    forward.run(tokens.data(), 4, 0, cache, pool);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("attention sinks"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvslim
