// The training ops: every backward against central finite differences of its forward in double
// precision (loss = sum(r * output) for a random r, so d(loss)/d(output) = r), and forwards
// against naive loops written here or the inference kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "tensor/ops.h"
#include "train/grad_ops.h"
#include "util/error.h"

namespace kvslim::train {
namespace {

using Vec = std::vector<double>;

Vec random_vec(size_t n, uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  Vec v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

double weighted_sum(const Vec& r, const Vec& y) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += r[i] * y[i];
  return s;
}

// max |analytic - numeric| / max |numeric|, the numeric gradient of loss() with respect to x by
// central differences (x is perturbed in place and restored).
double gradient_error(Vec& x, const Vec& analytic, const std::function<double()>& loss, double h = 1e-5) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double up = loss();
    x[i] = x0 - h;
    const double down = loss();
    x[i] = x0;
    const double numeric = (up - down) / (2 * h);
    err = std::max(err, std::abs(analytic[i] - numeric));
    scale = std::max(scale, std::abs(numeric));
  }
  EXPECT_GT(scale, 1e-6) << "the gradient is (numerically) zero: the check would prove nothing";
  return err / scale;
}

constexpr double kTol = 1e-6;

TEST(TrainOps, EmbeddingGradient) {
  const int vocab = 7, dim = 5;
  const std::vector<int32_t> tokens = {3, 0, 3, 6, 1};  // a repeated id accumulates
  const int64_t n = int64_t(tokens.size());
  Vec table = random_vec(vocab * dim, 1), r = random_vec(n * dim, 2);
  auto loss = [&] {
    Vec out(n * dim);
    embedding_forward(table.data(), tokens.data(), n, dim, out.data());
    return weighted_sum(r, out);
  };
  Vec d_table(table.size(), 0.0);
  embedding_backward(r.data(), tokens.data(), n, dim, d_table.data());
  EXPECT_LT(gradient_error(table, d_table, loss), kTol);
  EXPECT_DOUBLE_EQ(d_table[3 * dim + 2], r[0 * dim + 2] + r[2 * dim + 2]);
  EXPECT_EQ(d_table[2 * dim], 0.0);  // id 2 is never used
}

TEST(TrainOps, RmsNormForwardByHand) {
  ThreadPool pool(1);
  // x = (3, 4): mean square 12.5, rstd = 1/sqrt(12.5); w = (1, 2).
  const Vec x = {3, 4}, w = {1, 2};
  Vec y(2), rstd(1);
  rmsnorm_forward(x.data(), w.data(), 1, 2, 0.0, y.data(), rstd.data(), pool);
  EXPECT_NEAR(rstd[0], 1 / std::sqrt(12.5), 1e-15);
  EXPECT_NEAR(y[0], 3 / std::sqrt(12.5), 1e-15);
  EXPECT_NEAR(y[1], 8 / std::sqrt(12.5), 1e-15);
}

TEST(TrainOps, RmsNormFloatMatchesInferenceKernel) {
  ThreadPool pool(2);
  const int n = 3, dim = 40;
  std::vector<float> x(n * dim), w(dim), y(n * dim), rstd(n), ref(dim);
  const Vec xd = random_vec(x.size(), 3), wd = random_vec(dim, 4, 0.5, 1.5);
  std::copy(xd.begin(), xd.end(), x.begin());
  std::copy(wd.begin(), wd.end(), w.begin());
  rmsnorm_forward(x.data(), w.data(), n, dim, 1e-5f, y.data(), rstd.data(), pool);
  for (int t = 0; t < n; ++t) {
    rmsnorm(x.data() + t * dim, w.data(), ref.data(), dim, 1e-5f);
    for (int i = 0; i < dim; ++i) EXPECT_NEAR(y[t * dim + i], ref[i], 1e-6f * std::abs(ref[i]) + 1e-7f);
  }
}

TEST(TrainOps, RmsNormGradient) {
  ThreadPool pool(2);
  const int n = 4, dim = 9;
  Vec x = random_vec(n * dim, 5), w = random_vec(dim, 6, 0.5, 1.5), r = random_vec(n * dim, 7);
  const double eps = 1e-3;
  auto loss = [&] {
    Vec y(n * dim), rstd(n);
    rmsnorm_forward(x.data(), w.data(), n, dim, eps, y.data(), rstd.data(), pool);
    return weighted_sum(r, y);
  };
  Vec y(n * dim), rstd(n);
  rmsnorm_forward(x.data(), w.data(), n, dim, eps, y.data(), rstd.data(), pool);
  // dx accumulates: start from a known value and subtract it again.
  Vec dx(x.size(), 0.25), dw(dim, 0.0);
  rmsnorm_backward(x.data(), w.data(), rstd.data(), r.data(), n, dim, dx.data(), dw.data(), pool);
  for (auto& v : dx) v -= 0.25;
  EXPECT_LT(gradient_error(x, dx, loss), kTol);
  EXPECT_LT(gradient_error(w, dw, loss), kTol);
}

TEST(TrainOps, LinearForwardMatchesNaiveLoop) {
  ThreadPool pool(2);
  const int n = 37, in = 6, out = 5;  // more rows than one thread's grain
  const Vec x = random_vec(n * in, 8), w = random_vec(out * in, 9), b = random_vec(out, 10);
  Vec y(n * out);
  linear_forward(x.data(), w.data(), b.data(), n, in, out, y.data(), pool);
  for (int t = 0; t < n; ++t)
    for (int o = 0; o < out; ++o) {
      double want = b[o];
      for (int i = 0; i < in; ++i) want += x[t * in + i] * w[o * in + i];
      EXPECT_NEAR(y[t * out + o], want, 1e-12);
    }
}

TEST(TrainOps, LinearGradientWithBias) {
  ThreadPool pool(2);
  const int n = 21, in = 7, out = 18;
  Vec x = random_vec(n * in, 11), w = random_vec(out * in, 12), b = random_vec(out, 13), r = random_vec(n * out, 14);
  auto loss = [&] {
    Vec y(n * out);
    linear_forward(x.data(), w.data(), b.data(), n, in, out, y.data(), pool);
    return weighted_sum(r, y);
  };
  Vec dx(x.size(), 0.0), dw(w.size(), 0.0), db(out, 0.0);
  linear_backward(x.data(), w.data(), r.data(), n, in, out, dx.data(), false, dw.data(), db.data(), pool);
  EXPECT_LT(gradient_error(x, dx, loss), kTol);
  EXPECT_LT(gradient_error(w, dw, loss), kTol);
  EXPECT_LT(gradient_error(b, db, loss), kTol);
  // accumulate_dx adds the same gradient again; dw and db always accumulate.
  const Vec dx1 = dx, dw1 = dw;
  linear_backward(x.data(), w.data(), r.data(), n, in, out, dx.data(), true, dw.data(), (double*)nullptr, pool);
  for (size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx[i], 2 * dx1[i], 1e-12);
  for (size_t i = 0; i < dw.size(); ++i) EXPECT_NEAR(dw[i], 2 * dw1[i], 1e-12);
}

TEST(TrainOps, RopeMatchesInferenceKernel) {
  const int heads = 3, hd = 8, n = 5;
  const RopeTable<float> table(hd, 10000.0, 64);
  const std::vector<int32_t> pos = {0, 1, 7, 30, 63};
  const Vec xd = random_vec(n * heads * hd, 15);
  std::vector<float> x(xd.begin(), xd.end()), ref = x;
  rope_forward(x.data(), n, heads, pos.data(), table);
  RopeConfig cfg;
  cfg.head_dim = hd;
  cfg.n_rot = hd;
  cfg.base = 10000.0f;
  for (int t = 0; t < n; ++t) rope_inplace(ref.data() + t * heads * hd, heads, pos[t], cfg);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_FLOAT_EQ(x[i], ref[i]);
}

TEST(TrainOps, RopeGradient) {
  const int heads = 2, hd = 6, n = 4;
  const RopeTable<double> table(hd, 500.0, 16);
  const std::vector<int32_t> pos = {0, 3, 9, 15};
  Vec x = random_vec(n * heads * hd, 16), r = random_vec(x.size(), 17);
  auto loss = [&] {
    Vec y = x;
    rope_forward(y.data(), n, heads, pos.data(), table);
    return weighted_sum(r, y);
  };
  Vec dx = r;
  rope_backward(dx.data(), n, heads, pos.data(), table);
  EXPECT_LT(gradient_error(x, dx, loss), kTol);
}

TEST(TrainOps, RopeRejectsPositionOutsideTable) {
  const RopeTable<double> table(4, 10000.0, 8);
  Vec x(4);
  const int32_t pos = 8;
  EXPECT_THROW(rope_forward(x.data(), 1, 1, &pos, table), Error);
  EXPECT_THROW(RopeTable<float>(5, 10000.0, 8), Error);
}

// Naive causal GQA attention: per sequence, head and query, explicit softmax over keys 0..i.
Vec naive_attention(const Vec& q, const Vec& k, const Vec& v, const std::vector<int64_t>& starts,
                    const AttentionShape& s) {
  const int hd = s.head_dim, group = s.n_heads / s.n_kv_heads;
  const int64_t qs = int64_t(s.n_heads) * hd, ks = int64_t(s.n_kv_heads) * hd;
  Vec out(q.size(), 0.0);
  for (size_t seq = 0; seq + 1 < starts.size(); ++seq)
    for (int64_t i = starts[seq]; i < starts[seq + 1]; ++i)
      for (int h = 0; h < s.n_heads; ++h) {
        const int g = h / group;
        Vec w;
        double mx = -1e300;
        for (int64_t j = starts[seq]; j <= i; ++j) {
          double dot = 0;
          for (int d = 0; d < hd; ++d) dot += q[i * qs + h * hd + d] * k[j * ks + g * hd + d];
          w.push_back(dot / std::sqrt(double(hd)));
          mx = std::max(mx, w.back());
        }
        double sum = 0;
        for (auto& x : w) sum += (x = std::exp(x - mx));
        for (int64_t j = starts[seq]; j <= i; ++j)
          for (int d = 0; d < hd; ++d) out[i * qs + h * hd + d] += w[j - starts[seq]] / sum * v[j * ks + g * hd + d];
      }
  return out;
}

struct AttentionCase {
  AttentionShape shape;
  std::vector<int64_t> starts;
};

void check_attention(const AttentionCase& c, uint64_t seed, size_t max_checked) {
  ThreadPool pool(2);
  const AttentionShape& s = c.shape;
  const int64_t n = c.starts.back();
  Vec q = random_vec(n * s.n_heads * s.head_dim, seed, -2, 2);
  Vec k = random_vec(n * s.n_kv_heads * s.head_dim, seed + 1, -2, 2);
  Vec v = random_vec(n * s.n_kv_heads * s.head_dim, seed + 2);
  const Vec r = random_vec(q.size(), seed + 3);
  Vec out(q.size());
  attention_forward(q.data(), k.data(), v.data(), c.starts, s, out.data(), pool);
  const Vec want = naive_attention(q, k, v, c.starts, s);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want[i], 1e-12) << "element " << i;

  Vec dq(q.size(), 7.0), dk(k.size(), 7.0), dv(v.size(), 7.0);  // overwritten, not accumulated
  attention_backward(q.data(), k.data(), v.data(), r.data(), c.starts, s, dq.data(), dk.data(), dv.data(), pool);
  // Finite differences through the naive reference, on at most max_checked elements of each
  // input (spread evenly, so long cases stay fast).
  auto check = [&](Vec& x, const Vec& dx, const char* name) {
    const size_t stride = std::max<size_t>(1, x.size() / max_checked);
    Vec sub, sub_dx;
    std::vector<size_t> idx;
    for (size_t i = 0; i < x.size(); i += stride) {
      idx.push_back(i);
      sub.push_back(x[i]);
      sub_dx.push_back(dx[i]);
    }
    auto loss = [&] {
      for (size_t j = 0; j < idx.size(); ++j) x[idx[j]] = sub[j];
      return weighted_sum(r, naive_attention(q, k, v, c.starts, s));
    };
    EXPECT_LT(gradient_error(sub, sub_dx, loss), kTol) << name;
    loss();
  };
  check(q, dq, "dq");
  check(k, dk, "dk");
  check(v, dv, "dv");
}

TEST(TrainOps, AttentionGqaTwoSequences) {
  // Two packed sequences (5 and 3 tokens): no attention crosses the boundary.
  check_attention({{4, 2, 4}, {0, 5, 8}}, 20, 1000);
}

TEST(TrainOps, AttentionMultiHeadAndEmptySequence) { check_attention({{3, 3, 6}, {0, 4, 4, 6}}, 30, 1000); }

TEST(TrainOps, AttentionLongerThanOneQueryTile) {
  // 150 and 131 tokens: the second query tile of each sequence sees the first tile's keys.
  check_attention({{2, 1, 4}, {0, 150, 281}}, 40, 60);
}

TEST(TrainOps, AttentionRejectsBadShape) {
  ThreadPool pool(1);
  Vec x(12);
  EXPECT_THROW(attention_forward(x.data(), x.data(), x.data(), {0, 1}, AttentionShape{3, 2, 4}, x.data(), pool), Error);
  EXPECT_THROW(attention_forward(x.data(), x.data(), x.data(), {1, 0}, AttentionShape{1, 1, 4}, x.data(), pool), Error);
}

TEST(TrainOps, SwigluGradient) {
  const int n = 23;
  Vec gate = random_vec(n, 50, -4, 4), up = random_vec(n, 51), r = random_vec(n, 52);
  auto loss = [&] {
    Vec h(n);
    swiglu_forward(gate.data(), up.data(), n, h.data());
    return weighted_sum(r, h);
  };
  Vec dg(n, 3.0), du(n, 3.0);
  swiglu_backward(gate.data(), up.data(), r.data(), n, dg.data(), du.data());
  EXPECT_LT(gradient_error(gate, dg, loss), kTol);
  EXPECT_LT(gradient_error(up, du, loss), kTol);
  // silu(2) * 3 = 2 / (1 + e^-2) * 3 by hand, and the float path (the inference kernel) agrees.
  const float g = 2.0f, u = 3.0f;
  float h = 0;
  swiglu_forward(&g, &u, 1, &h);
  EXPECT_NEAR(h, 6.0 / (1.0 + std::exp(-2.0)), 1e-6);
}

TEST(TrainOps, CrossEntropyByHand) {
  ThreadPool pool(1);
  // Uniform logits over 4 classes: nll = log 4 for each token; weights 1 and 0.5.
  Vec logits(8, 0.3);
  const std::vector<int32_t> targets = {2, 0};
  const std::vector<float> weights = {1.0f, 0.5f};
  std::vector<double> nll(2);
  EXPECT_NEAR(cross_entropy_forward(logits.data(), targets.data(), weights.data(), 2, 4, nll.data(), pool),
              1.5 * std::log(4.0), 1e-12);
  EXPECT_NEAR(nll[1], std::log(4.0), 1e-12);
  EXPECT_NEAR(logits[0], 0.25, 1e-15);
  cross_entropy_backward(logits.data(), targets.data(), weights.data(), 2, 4, 2.0, pool);
  EXPECT_NEAR(logits[2], 2.0 * (0.25 - 1), 1e-15);
  EXPECT_NEAR(logits[3], 2.0 * 0.25, 1e-15);
  EXPECT_NEAR(logits[4], 2.0 * 0.5 * (0.25 - 1), 1e-15);
}

TEST(TrainOps, CrossEntropyGradient) {
  ThreadPool pool(2);
  const int n = 5, vocab = 9;
  Vec logits = random_vec(n * vocab, 60, -3, 3);
  const std::vector<int32_t> targets = {4, 0, 8, 4, 2};
  const std::vector<float> weights = {1.0f, 0.0f, 0.25f, 2.0f, 1.0f};  // a zero weight drops the token
  const double scale = 0.7;
  std::vector<double> nll(n);
  auto loss = [&] {
    Vec p = logits;
    return scale * cross_entropy_forward(p.data(), targets.data(), weights.data(), n, vocab, nll.data(), pool);
  };
  Vec d = logits;
  cross_entropy_forward(d.data(), targets.data(), weights.data(), n, vocab, nll.data(), pool);
  cross_entropy_backward(d.data(), targets.data(), weights.data(), n, vocab, scale, pool);
  EXPECT_LT(gradient_error(logits, d, loss), kTol);
  for (int i = 0; i < vocab; ++i) EXPECT_EQ(d[1 * vocab + i], 0.0);
}

TEST(TrainOps, CrossEntropyRejectsTargetOutsideVocabulary) {
  ThreadPool pool(1);
  Vec logits(4, 0.0);
  const int32_t target = 4;
  const float weight = 0;
  double nll = 0;
  EXPECT_THROW(cross_entropy_forward(logits.data(), &target, &weight, 1, 4, &nll, pool), Error);
}

}  // namespace
}  // namespace kvslim::train
