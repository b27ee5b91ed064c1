// qwen3moe and the mixture-of-experts FFN: the engine's forward pass against a naive
// double-precision reference written here (Qwen3 attention with Q/K norms; router softmax over all
// experts, top k, weights renormalised to sum 1, expert mixing), the grouped prefill path against
// the per-token one, the gpt-oss variants of the FFN (router and expert biases, softmax over the
// top k logits, the clamped SwiGLU) against plain loops, the bytes a decoded token reads, and the
// errors for files whose metadata contradicts their tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

#include "forward_checks.h"
#include "naive_reference.h"
#include "model/moe_ffn.h"
#include "test_models.h"

namespace kvslim {
namespace {

using testing::edited_copy;
using testing::expect_load_error;
using testing::matvec;
using testing::relative_error;
using testing::rmsnorm;
using testing::tensor;
using testing::test_tokens;
using testing::Vec;

std::string qwen3moe_model(int experts = 8, int used = 2, DType type = DType::F32, int layers = 2) {
  testing::TinyModel m;
  m.arch = Arch::Qwen3Moe;
  m.type = type;
  m.layers = layers;
  m.ffn = 32;
  m.experts = experts;
  m.experts_used = used;
  m.seed = 5;
  return testing::make_model(m);
}

// ---- the reference: plain loops over double copies of the weights (naive_reference.h) ----

void norm_and_rope(Vec& x, int heads, int hd, const Vec& norm, double eps, int64_t pos, double base) {
  for (int h = 0; h < heads; ++h) {
    Vec v = rmsnorm(Vec(x.begin() + h * hd, x.begin() + (h + 1) * hd), norm.data(), eps);
    for (int i = 0; i < hd / 2; ++i) {
      const double a = double(pos) * std::pow(base, -2.0 * i / hd);
      const double x0 = v[i], x1 = v[i + hd / 2];
      v[i] = x0 * std::cos(a) - x1 * std::sin(a);
      v[i + hd / 2] = x0 * std::sin(a) + x1 * std::cos(a);
    }
    std::copy(v.begin(), v.end(), x.begin() + h * hd);
  }
}

// One token through a layer's experts: qwen3moe's routing (softmax over all, top k, renormalised).
Vec reference_moe(const Vec& h, const Vec& router, const Vec& gate, const Vec& up, const Vec& down, int n_exp, int k,
                  int ffn) {
  const size_t dim = h.size();
  Vec p = matvec(router, h);
  const double mx = *std::max_element(p.begin(), p.end());
  double sum = 0;
  for (double& v : p) sum += v = std::exp(v - mx);
  for (double& v : p) v /= sum;
  std::vector<int> idx(static_cast<size_t>(n_exp));
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](int a, int b) { return p[a] > p[b]; });
  double wsum = 0;
  for (int j = 0; j < k; ++j) wsum += p[idx[j]];
  Vec out(dim, 0.0);
  for (int j = 0; j < k; ++j) {
    const int e = idx[j];
    const Vec g = matvec(gate.data() + size_t(e) * ffn * dim, size_t(ffn), h);
    const Vec u = matvec(up.data() + size_t(e) * ffn * dim, size_t(ffn), h);
    Vec act(static_cast<size_t>(ffn));
    for (int i = 0; i < ffn; ++i) act[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    const Vec d = matvec(down.data() + size_t(e) * dim * ffn, dim, act);
    for (size_t i = 0; i < dim; ++i) out[i] += p[e] / wsum * d[i];
  }
  return out;
}

std::vector<Vec> reference_logits(const std::string& path, const std::vector<int32_t>& tokens) {
  const gguf::File f = gguf::File::open(path);
  const int layers = int(f.get_uint("qwen3moe.block_count")), dim = int(f.get_uint("qwen3moe.embedding_length"));
  const int heads = int(f.get_uint("qwen3moe.attention.head_count"));
  const int kv_heads = int(f.get_uint("qwen3moe.attention.head_count_kv"));
  const int hd = int(f.get_uint("qwen3moe.attention.key_length")), group = heads / kv_heads;
  const int n_exp = int(f.get_uint("qwen3moe.expert_count")), k = int(f.get_uint("qwen3moe.expert_used_count"));
  const int ffn = int(f.get_uint("qwen3moe.expert_feed_forward_length"));
  const double eps = f.get_float("qwen3moe.attention.layer_norm_rms_epsilon");
  const double base = f.get_float("qwen3moe.rope.freq_base");
  const Vec embd = tensor(f, "token_embd.weight");
  const size_t n = tokens.size();
  std::vector<Vec> x(n);
  for (size_t t = 0; t < n; ++t) x[t] = Vec(embd.begin() + tokens[t] * dim, embd.begin() + (tokens[t] + 1) * dim);
  for (int l = 0; l < layers; ++l) {
    auto w = [&](const char* name) { return tensor(f, fmt::format("blk.{}.{}", l, name)); };
    const Vec attn_norm = w("attn_norm.weight"), wq = w("attn_q.weight"), wk = w("attn_k.weight"),
              wv = w("attn_v.weight"), wo = w("attn_output.weight"), qn = w("attn_q_norm.weight"),
              kn = w("attn_k_norm.weight"), ffn_norm = w("ffn_norm.weight"), router = w("ffn_gate_inp.weight"),
              gate = w("ffn_gate_exps.weight"), up = w("ffn_up_exps.weight"), down = w("ffn_down_exps.weight");
    std::vector<Vec> q(n), kk(n), v(n);
    for (size_t t = 0; t < n; ++t) {
      const Vec h = rmsnorm(x[t], attn_norm.data(), eps);
      q[t] = matvec(wq, h);
      kk[t] = matvec(wk, h);
      v[t] = matvec(wv, h);
      norm_and_rope(q[t], heads, hd, qn, eps, int64_t(t), base);
      norm_and_rope(kk[t], kv_heads, hd, kn, eps, int64_t(t), base);
    }
    for (size_t t = 0; t < n; ++t) {
      Vec attn(size_t(heads * hd), 0.0);
      for (int hh = 0; hh < heads; ++hh) {
        const int kvh = hh / group;
        Vec p(t + 1, 0.0);
        double mx = -1e300, sum = 0;
        for (size_t j = 0; j <= t; ++j) {
          for (int d = 0; d < hd; ++d) p[j] += q[t][hh * hd + d] * kk[j][kvh * hd + d];
          p[j] /= std::sqrt(double(hd));
          mx = std::max(mx, p[j]);
        }
        for (size_t j = 0; j <= t; ++j) sum += p[j] = std::exp(p[j] - mx);
        for (size_t j = 0; j <= t; ++j)
          for (int d = 0; d < hd; ++d) attn[hh * hd + d] += p[j] / sum * v[j][kvh * hd + d];
      }
      const Vec o = matvec(wo, attn);
      for (int i = 0; i < dim; ++i) x[t][i] += o[i];
      const Vec y = reference_moe(rmsnorm(x[t], ffn_norm.data(), eps), router, gate, up, down, n_exp, k, ffn);
      for (int i = 0; i < dim; ++i) x[t][i] += y[i];
    }
  }
  const Vec out_norm = tensor(f, "output_norm.weight"), output = tensor(f, "output.weight");
  std::vector<Vec> logits(n);
  for (size_t t = 0; t < n; ++t) logits[t] = matvec(output, rmsnorm(x[t], out_norm.data(), eps));
  return logits;
}

TEST(Qwen3Moe, ConfigReadsTheExpertKeys) {
  const gguf::File f = gguf::File::open(qwen3moe_model(8, 2));
  const ModelConfig c = ModelConfig::from_gguf(f);
  EXPECT_EQ(c.arch, Arch::Qwen3Moe);
  EXPECT_EQ(c.moe.n_experts, 8);
  EXPECT_EQ(c.moe.n_experts_used, 2);
  EXPECT_EQ(c.moe.expert_ffn_dim, 32);
  EXPECT_EQ(c.moe.gating, MoeGating::Softmax);
  EXPECT_TRUE(c.moe.normalize_weights);
  EXPECT_TRUE(c.has_qk_norm());
  EXPECT_TRUE(c.rope_neox());
  // Experts are views into the mapped file: expert e of a [dim, ffn, n] tensor starts e * ffn rows in.
  const auto model = Model::load(qwen3moe_model(8, 2));
  const MoeWeights& w = model->layers()[1].moe;
  ASSERT_EQ(w.up.size(), 8u);
  const gguf::TensorInfo* up = model->file().find_tensor("blk.1.ffn_up_exps.weight");
  EXPECT_EQ(w.up[5].data, model->file().tensor_data(*up) + 5 * 32 * 64 * sizeof(float));
  EXPECT_EQ(w.down[3].rows, 64);
  EXPECT_EQ(w.down[3].cols, 32);
}

TEST(Qwen3Moe, ForwardMatchesNaiveReferenceInBlocksAndTokenByToken) {
  for (auto [experts, used] : {std::pair{8, 2}, std::pair{6, 3}, std::pair{4, 1}}) {
    const std::string path = qwen3moe_model(experts, used);
    const auto model = Model::load(path);
    const auto tokens = test_tokens(21, model->config().n_vocab);
    const std::vector<Vec> want = reference_logits(path, tokens);
    for (int block : {1, 4, 21}) {
      const double err = relative_error(testing::engine_logits(*model, tokens, block), want);
      EXPECT_LT(err, 2e-5) << experts << " experts, " << used << " used, block " << block;
    }
  }
  // The routing matters: the same weights with another k give other logits.
  const auto model = Model::load(qwen3moe_model(8, 2));
  const auto tokens = test_tokens(9, model->config().n_vocab);
  const std::string k3 = edited_copy(qwen3moe_model(8, 2), "qwen3moe-k3.gguf", [](gguf::Writer& w) {
    w.set("qwen3moe.expert_used_count", gguf::Value::of_u32(3));
  });
  EXPECT_GT(relative_error(testing::engine_logits(*model, tokens, 9), reference_logits(k3, tokens)), 1e-3);
}

// A quantized file: the prefill path (each expert's rows in one matmul) and token-by-token decode
// (matvecs of the k experts) give the same logits. (Against the f32 reference a quantized router
// may pick another expert for some token, a jump no tolerance describes.)
TEST(Qwen3Moe, QuantizedPrefillAndDecodeAgree) {
  const auto model = Model::load(qwen3moe_model(8, 2, DType::Q8_0, 2));
  const auto tokens = test_tokens(12, model->config().n_vocab);
  const std::vector<float> decode = testing::engine_logits(*model, tokens, 1);
  const std::vector<float> prefill = testing::engine_logits(*model, tokens, 12);
  std::vector<Vec> want(tokens.size());
  const size_t n_vocab = size_t(model->config().n_vocab);
  for (size_t t = 0; t < tokens.size(); ++t)
    want[t] = Vec(decode.begin() + t * n_vocab, decode.begin() + (t + 1) * n_vocab);
  EXPECT_LT(relative_error(prefill, want), 1e-2);
}

// ---- the FFN alone: routing by hand, the gpt-oss variants, grouped vs per token ----

TEST(MoeFfn, RoutingByHand) {
  MoeConfig m;
  m.n_experts = 4;
  m.n_experts_used = 2;
  const double e0 = 1, e1 = std::exp(3.0), e2 = std::exp(2.0), e3 = std::exp(-1.0), all = e0 + e1 + e2 + e3;
  int32_t experts[2];
  float weights[2];
  {  // softmax over all four, top 2 = experts 1 and 2, not renormalised
    float logits[4] = {0, 3, 2, -1};
    route_token(m, logits, experts, weights);
    EXPECT_EQ(experts[0], 1);
    EXPECT_EQ(experts[1], 2);
    EXPECT_NEAR(weights[0], e1 / all, 1e-6);
    EXPECT_NEAR(weights[1], e2 / all, 1e-6);
  }
  {  // renormalised (qwen3moe): e^3 / (e^3 + e^2)
    m.normalize_weights = true;
    float logits[4] = {0, 3, 2, -1};
    route_token(m, logits, experts, weights);
    EXPECT_NEAR(weights[0], e1 / (e1 + e2), 1e-6);
    EXPECT_NEAR(weights[1], e2 / (e1 + e2), 1e-6);
  }
  {  // softmax of the top 2 logits (gpt-oss), scaled by 2
    m.normalize_weights = false;
    m.gating = MoeGating::SoftmaxWeight;
    m.weights_scale = 2.0f;
    float logits[4] = {0, 3, 2, -1};
    route_token(m, logits, experts, weights);
    EXPECT_EQ(experts[0], 1);
    EXPECT_NEAR(weights[0], 2 * e1 / (e1 + e2), 1e-6);
    EXPECT_NEAR(weights[1], 2 * e2 / (e1 + e2), 1e-6);
  }
}

TEST(MoeFfn, ClampedSwigluMatchesGgmlsFormula) {
  MoeConfig m;
  m.activation = MoeActivation::SwigluOai;
  const float gate_in[5] = {-9, -1, 0.5f, 3, 12}, up[5] = {-20, 0.25f, 1, 6.5f, 30};
  float gate[5];
  std::copy(gate_in, gate_in + 5, gate);
  moe_activation(m, gate, up, 5);
  for (int i = 0; i < 5; ++i) {
    const double x = std::min<double>(gate_in[i], 7.0), y = std::clamp<double>(up[i], -7.0, 7.0);
    EXPECT_NEAR(gate[i], x / (1 + std::exp(-1.702 * x)) * (y + 1), 1e-5 * (1 + std::abs(x * y))) << i;
  }
  EXPECT_NEAR(gate[4], 7.0 / (1 + std::exp(-1.702 * 7.0)) * 8.0, 1e-4);  // both clamped
}

// Random f32 experts held in memory, with every optional part of the FFN.
struct Experts {
  MoeConfig moe;
  int dim = 32;
  std::vector<float> router, gate, up, down;
  MoeWeights w;

  Experts(const MoeConfig& m, bool biases, uint64_t seed) : moe(m) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int e = m.n_experts, f = m.expert_ffn_dim;
    auto fill = [&](std::vector<float>& v, size_t n, float s) {
      v.resize(n);
      for (float& x : v) x = nd(rng) * s;
    };
    fill(router, size_t(e) * dim, 1.0f / std::sqrt(float(dim)) * 3);
    fill(gate, size_t(e) * f * dim, 1.0f / std::sqrt(float(dim)));
    fill(up, size_t(e) * f * dim, 1.0f / std::sqrt(float(dim)));
    fill(down, size_t(e) * dim * f, 1.0f / std::sqrt(float(f)));
    w.router = WeightView{DType::F32, router.data(), e, dim};
    for (int i = 0; i < e; ++i) {
      w.gate.push_back(WeightView{DType::F32, gate.data() + size_t(i) * f * dim, f, dim});
      w.up.push_back(WeightView{DType::F32, up.data() + size_t(i) * f * dim, f, dim});
      w.down.push_back(WeightView{DType::F32, down.data() + size_t(i) * dim * f, dim, f});
    }
    if (biases) {
      fill(w.router_bias, size_t(e), 0.5f);
      fill(w.gate_bias, size_t(e) * f, 0.5f);
      fill(w.up_bias, size_t(e) * f, 0.5f);
      fill(w.down_bias, size_t(e) * dim, 0.5f);
    }
  }

  // The naive FFN of one token, in double: bias, gating, top k, activation, mixing; with `lora`,
  // its gate, up and down terms (scale * B A v) added to every picked expert's projections.
  Vec reference(const float* xf, const LoraAdapter* lora = nullptr, int layer = 0) const {
    auto lora_term = [&](LoraSite site, const Vec& v, Vec& y) {
      if (!lora) return;
      const int r = lora->rank(), in = lora->in(site), out = lora->out(site);
      Vec av(size_t(r), 0.0);
      for (int i = 0; i < r; ++i)
        for (int c = 0; c < in; ++c) av[i] += double(lora->a(layer, site)[i * in + c]) * v[c];
      for (int o = 0; o < out; ++o)
        for (int i = 0; i < r; ++i) y[o] += lora->scale() * double(lora->b(layer, site)[o * r + i]) * av[i];
    };
    const int e = moe.n_experts, k = moe.n_experts_used, f = moe.expert_ffn_dim;
    const Vec x(xf, xf + dim);
    auto mv = [&](const std::vector<float>& w, size_t first_row, int rows, int cols, const Vec& v) {
      Vec y(size_t(rows), 0.0);
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) y[r] += double(w[(first_row + r) * cols + c]) * v[c];
      return y;
    };
    Vec logit = mv(router, 0, e, dim, x);
    for (int i = 0; i < e && !w.router_bias.empty(); ++i) logit[i] += w.router_bias[i];
    Vec score = logit;
    if (moe.gating == MoeGating::Softmax) {
      double s = 0;
      for (double& v : score) s += v = std::exp(v);
      for (double& v : score) v /= s;
    }
    std::vector<int> idx(static_cast<size_t>(e));
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [&](int a, int b) { return score[a] > score[b]; });
    Vec wt(static_cast<size_t>(k));
    for (int j = 0; j < k; ++j) wt[j] = score[idx[j]];
    if (moe.gating == MoeGating::SoftmaxWeight) {
      double s = 0;
      for (double& v : wt) s += v = std::exp(v);
      for (double& v : wt) v /= s;
    }
    if (moe.normalize_weights) {
      const double s = std::accumulate(wt.begin(), wt.end(), 0.0);
      for (double& v : wt) v /= s;
    }
    for (double& v : wt) v *= moe.weights_scale;
    Vec out(size_t(dim), 0.0);
    for (int j = 0; j < k; ++j) {
      const int ex = idx[j];
      Vec g = mv(gate, size_t(ex) * f, f, dim, x), u = mv(up, size_t(ex) * f, f, dim, x);
      lora_term(LoraSite::Gate, x, g);
      lora_term(LoraSite::Up, x, u);
      Vec a(static_cast<size_t>(f));
      for (int i = 0; i < f; ++i) {
        if (!w.gate_bias.empty()) g[i] += w.gate_bias[size_t(ex) * f + i];
        if (!w.up_bias.empty()) u[i] += w.up_bias[size_t(ex) * f + i];
        if (moe.activation == MoeActivation::Swiglu) {
          a[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
        } else {
          const double gx = std::min<double>(g[i], moe.swiglu_limit);
          const double uy = std::clamp<double>(u[i], -moe.swiglu_limit, moe.swiglu_limit);
          a[i] = gx / (1 + std::exp(-moe.swiglu_alpha * gx)) * (uy + 1);
        }
      }
      Vec d = mv(down, size_t(ex) * dim, dim, f, a);
      lora_term(LoraSite::Down, a, d);
      for (int i = 0; i < dim; ++i) {
        if (!w.down_bias.empty()) d[i] += w.down_bias[size_t(ex) * dim + i];
        out[i] += wt[j] * d[i];
      }
    }
    return out;
  }
};

std::vector<float> random_rows(int n, int dim, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(size_t(n) * dim);
  for (float& v : x) v = nd(rng);
  return x;
}

double max_rel_error(const std::vector<float>& got, const std::vector<Vec>& want) {
  double err = 0, scale = 0;
  for (size_t t = 0; t < want.size(); ++t)
    for (size_t i = 0; i < want[t].size(); ++i) {
      err = std::max(err, std::abs(got[t * want[t].size() + i] - want[t][i]));
      scale = std::max(scale, std::abs(want[t][i]));
    }
  return err / scale;
}

TEST(MoeFfn, GptOssVariantsMatchNaiveReference) {
  struct Case {
    const char* name;
    MoeGating gating;
    bool normalize, biases;
    MoeActivation act;
    float scale;
  };
  for (const Case& c :
       {Case{"qwen3moe", MoeGating::Softmax, true, false, MoeActivation::Swiglu, 1.0f},
        Case{"softmax unnormalised + biases", MoeGating::Softmax, false, true, MoeActivation::Swiglu, 1.0f},
        Case{"gpt-oss", MoeGating::SoftmaxWeight, false, true, MoeActivation::SwigluOai, 1.0f},
        Case{"gpt-oss scaled", MoeGating::SoftmaxWeight, false, true, MoeActivation::SwigluOai, 2.5f}}) {
    MoeConfig m;
    m.n_experts = 16;
    m.n_experts_used = 4;
    m.expert_ffn_dim = 24;
    m.gating = c.gating;
    m.normalize_weights = c.normalize;
    m.activation = c.act;
    m.weights_scale = c.scale;
    m.swiglu_limit = 1.5f;  // low enough that the clamps act on these activations
    const Experts ex(m, c.biases, 3);
    const int n = 19;
    const std::vector<float> x = random_rows(n, ex.dim, 4);
    std::vector<Vec> want;
    for (int t = 0; t < n; ++t) want.push_back(ex.reference(&x[size_t(t) * ex.dim]));
    ThreadPool pool(2);
    MoeFfn ffn(m, ex.dim, n);
    std::vector<float> grouped(x.size()), per_token(x.size()), one(x.size());
    ffn.run(ex.w, x.data(), n, grouped.data(), pool);
    ffn.run_per_token(ex.w, x.data(), n, per_token.data(), pool);
    for (int t = 0; t < n; ++t) ffn.run(ex.w, &x[size_t(t) * ex.dim], 1, &one[size_t(t) * ex.dim], pool);
    EXPECT_LT(max_rel_error(grouped, want), 1e-5) << c.name;
    EXPECT_LT(max_rel_error(per_token, want), 1e-5) << c.name;
    EXPECT_LT(max_rel_error(one, want), 1e-5) << c.name;
  }
}

// LookaheadKV's adapter on a MoE model: one low-rank term per site, shared by the experts.
TEST(MoeFfn, LoraTermsApplyToEveryPickedExpert) {
  MoeConfig m;
  m.n_experts = 8;
  m.n_experts_used = 3;
  m.expert_ffn_dim = 16;
  m.normalize_weights = true;
  const Experts ex(m, false, 5);
  ModelConfig c;
  c.n_layers = 2;
  c.dim = ex.dim;
  c.n_heads = 2;
  c.n_kv_heads = 2;
  c.head_dim = 16;
  c.ffn_dim = 999;  // a dense width the adapter must not use: the experts' is 16
  c.moe = m;
  LoraAdapter lora(c, 4, 8.0f);
  std::mt19937_64 rng(2);
  std::normal_distribution<float> nd(0.0f, 0.3f);
  for (float& v : lora.params()) v = nd(rng);
  ASSERT_EQ(lora.in(LoraSite::Down), 16);
  const int n = 7;
  const std::vector<float> x = random_rows(n, ex.dim, 6);
  std::vector<Vec> want, plain;
  for (int t = 0; t < n; ++t) {
    want.push_back(ex.reference(&x[size_t(t) * ex.dim], &lora, 1));
    plain.push_back(ex.reference(&x[size_t(t) * ex.dim]));
  }
  ThreadPool pool(2);
  MoeFfn ffn(m, ex.dim, n);
  std::vector<float> grouped(x.size()), one(x.size());
  ffn.run(ex.w, x.data(), n, grouped.data(), pool, &lora, 1);
  for (int t = 0; t < n; ++t) ffn.run(ex.w, &x[size_t(t) * ex.dim], 1, &one[size_t(t) * ex.dim], pool, &lora, 1);
  EXPECT_LT(max_rel_error(grouped, want), 1e-5);
  EXPECT_LT(max_rel_error(one, want), 1e-5);
  EXPECT_GT(max_rel_error(grouped, plain), 1e-2);  // the adapter's terms are not negligible
}

// The grouped path over a quantized model (each expert's rows through matmul) against the
// per-token path (matvec over the k experts).
TEST(MoeFfn, GroupedPrefillEqualsPerTokenOnQuantizedExperts) {
  for (DType type : {DType::Q8_0, DType::F16}) {
    testing::TinyModel tm;
    tm.arch = Arch::Qwen3Moe;
    tm.type = type;
    tm.dim = 128;
    tm.ffn = 64;
    tm.experts = 16;
    tm.experts_used = 4;
    const auto model = Model::load(testing::make_model(tm));
    const ModelConfig& c = model->config();
    const int n = 40;
    const std::vector<float> x = random_rows(n, c.dim, 9);
    ThreadPool pool(2);
    MoeFfn ffn(c.moe, c.dim, n);
    std::vector<float> grouped(x.size()), per_token(x.size());
    ffn.run(model->layers()[0].moe, x.data(), n, grouped.data(), pool);
    ffn.run_per_token(model->layers()[0].moe, x.data(), n, per_token.data(), pool);
    double err = 0, scale = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      err = std::max(err, double(std::abs(grouped[i] - per_token[i])));
      scale = std::max(scale, double(std::abs(per_token[i])));
    }
    EXPECT_GT(scale, 0.0);
    EXPECT_LT(err / scale, type == DType::Q8_0 ? 1e-2 : 1e-4) << dtype_name(type);
  }
}

TEST(Qwen3Moe, ActiveBytesCountKOfNExperts) {
  const auto model = Model::load(qwen3moe_model(8, 2));
  const ModelConfig& c = model->config();
  // f32: each expert is 3 * ffn * dim floats; 6 of 8 are not read per token, in each layer;
  // the embedding matrix but one row is not read either.
  const uint64_t expert = 3ull * 32 * 64 * 4;
  const uint64_t embd_unread = uint64_t(c.n_vocab - 1) * 64 * 4;
  EXPECT_EQ(model->active_weight_bytes_per_token(), model->weight_bytes() - 2 * 6 * expert - embd_unread);
}

// ---- bad input: one error naming the key or tensor ----

TEST(Qwen3Moe, MetadataThatContradictsTheTensorsNamesTheKeyOrTensor) {
  const std::string path = qwen3moe_model(8, 2);
  auto set = [&](const char* name, const char* key, uint32_t value) {
    return edited_copy(path, name, [&](gguf::Writer& w) { w.set(key, gguf::Value::of_u32(value)); });
  };
  expect_load_error(set("moe-count.gguf", "qwen3moe.expert_count", 16), "blk.0.ffn_gate_inp.weight");
  expect_load_error(set("moe-topk.gguf", "qwen3moe.expert_used_count", 9), "qwen3moe.expert_used_count");
  expect_load_error(set("moe-topk0.gguf", "qwen3moe.expert_used_count", 0), "qwen3moe.expert_used_count");
  expect_load_error(set("moe-ffn.gguf", "qwen3moe.expert_feed_forward_length", 64), "blk.0.ffn_gate_exps.weight");
  expect_load_error(set("moe-gating-unknown.gguf", "qwen3moe.expert_gating_func", 9), "qwen3moe.expert_gating_func");
  expect_load_error(set("moe-gating-sigmoid.gguf", "qwen3moe.expert_gating_func", 2), "qwen3moe.expert_gating_func");
  expect_load_error(set("moe-gating-weight.gguf", "qwen3moe.expert_gating_func", 3), "qwen3moe.expert_gating_func");
  // The key that names the architecture's own function is accepted.
  EXPECT_NO_THROW(Model::load(set("moe-gating-softmax.gguf", "qwen3moe.expert_gating_func", 1)));
  // An expert tensor of the wrong shape (one expert short), or missing.
  const std::string short_up =
      edited_copy(path, "moe-short-up.gguf", {},
                  [](const gguf::TensorInfo& t, std::vector<uint64_t>& dims, std::vector<uint8_t>& bytes) {
                    if (t.name == "blk.1.ffn_up_exps.weight") {
                      dims[2] -= 1;
                      bytes.resize(bytes.size() / 8 * 7);
                    }
                    return true;
                  });
  expect_load_error(short_up, "blk.1.ffn_up_exps.weight");
  expect_load_error(edited_copy(path, "moe-no-down.gguf", {}, testing::without("blk.0.ffn_down_exps.weight")),
                    "blk.0.ffn_down_exps.weight");
  // Without expert_count (a copy of every key but that one).
  const gguf::File in = gguf::File::open(path);
  gguf::Writer w;
  for (const auto& entry : in.metadata())
    if (entry.key != "qwen3moe.expert_count") w.set(entry.key, entry.value);
  for (const gguf::TensorInfo& t : in.tensors())
    w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(in.tensor_data(t), in.tensor_data(t) + t.n_bytes));
  const std::string no_count = testing::temp_path("moe-no-count.gguf");
  w.write(no_count);
  expect_load_error(no_count, "qwen3moe.expert_count");
}

}  // namespace
}  // namespace kvslim
