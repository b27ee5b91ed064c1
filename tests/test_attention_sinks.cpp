// Attention sinks (gpt-oss): a learned logit per query head joins every softmax row's
// denominator and adds no value. Checked against a naive double-precision softmax written here:
// the softmax kernel itself (hand-computed values), the attention kernels at every instruction-set
// level (decode, prefill blocks, sparse, with and without a sliding window), the paged cache
// (prefill block + decode + after an eviction), the probe rows the methods see (they sum to
// 1 - the sink's share), and the softmax the sparse selectors take (add_softmax).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "kv/attention.h"
#include "kv/head_cache.h"
#include "kv/page_pool.h"
#include "kv/paged_cache.h"
#include "press/sparse_attention.h"
#include "tensor/isa.h"
#include "tensor/ops.h"
#include "util/error.h"
#include "util/thread_pool.h"
#include "random_values.h"

namespace kvslim {
namespace {

using test::normal_vec;

constexpr float kNoSink = -std::numeric_limits<float>::infinity();

TEST(AttentionSinks, SoftmaxWithASinkMatchesHandComputedValues) {
  // exp(0) = 1, exp(ln 2) = 2 and the sink exp(0) = 1: denominator 4.
  std::vector<float> x = {0.0f, std::log(2.0f)};
  softmax_inplace(x.data(), 2, 0.0f);
  EXPECT_NEAR(x[0], 0.25f, 1e-7);
  EXPECT_NEAR(x[1], 0.5f, 1e-7);
  // A sink far above the logits takes nearly all the mass (and sets the max: no overflow).
  std::vector<float> y = {1.0f, 2.0f, 3.0f};
  softmax_inplace(y.data(), 3, 1000.0f);
  for (float p : y) EXPECT_LT(p, 1e-30f);
  // Without a sink (the default), the row sums to 1: 1/(1 + e) and e/(1 + e).
  std::vector<float> z = {0.0f, 1.0f};
  softmax_inplace(z.data(), 2);
  EXPECT_NEAR(z[0], 1.0f / (1.0f + std::exp(1.0f)), 1e-7);
  EXPECT_NEAR(z[1], std::exp(1.0f) / (1.0f + std::exp(1.0f)), 1e-7);
  // Every level: 40 logits (vector bodies and tails) against the double formula.
  const auto logits = normal_vec(40, 5, 2.0f);
  const float sink = 1.5f;
  double mx = sink, sum = 0;
  for (float l : logits) mx = std::max(mx, double(l));
  for (float l : logits) sum += std::exp(l - mx);
  sum += std::exp(sink - mx);
  for (Isa isa : supported_isas()) {
    ScopedIsa level(isa);
    std::vector<float> p = logits;
    softmax_inplace(p.data(), int64_t(p.size()), sink);
    for (size_t i = 0; i < p.size(); ++i)
      EXPECT_NEAR(p[i], std::exp(logits[i] - mx) / sum, 1e-6) << isa_name(isa) << " [" << i << "]";
  }
}

// softmax(q.k / sqrt(d) over `tokens`, with `sink` in the denominator) . v, in double.
struct Reference {
  std::vector<double> probs, out;
  double sink_share = 0;
};

Reference reference(const std::vector<float>& k, const std::vector<float>& v, const float* q, int hd,
                    const std::vector<int32_t>& tokens, float sink) {
  Reference r;
  std::vector<double> s(tokens.size());
  double mx = sink;
  for (size_t j = 0; j < tokens.size(); ++j) {
    double d = 0;
    for (int i = 0; i < hd; ++i) d += double(q[i]) * k[size_t(tokens[j]) * hd + i];
    s[j] = d / std::sqrt(double(hd));
    mx = std::max(mx, s[j]);
  }
  double sum = sink > kNoSink ? std::exp(double(sink) - mx) : 0.0;
  const double sink_term = sum;
  for (double& x : s) sum += (x = std::exp(x - mx));
  r.out.assign(size_t(hd), 0.0);
  for (size_t j = 0; j < tokens.size(); ++j) {
    s[j] /= sum;
    for (int i = 0; i < hd; ++i) r.out[size_t(i)] += s[j] * v[size_t(tokens[j]) * hd + i];
  }
  r.probs = s;
  r.sink_share = sink_term / sum;
  return r;
}

std::vector<int32_t> range(int64_t from, int64_t to) {
  std::vector<int32_t> v;
  for (int64_t i = from; i < to; ++i) v.push_back(int32_t(i));
  return v;
}

// Every level's kernels on one paged head with two query heads whose sinks differ (one above the
// typical logits, one below), with and without a window: decode, a prefill block of 5 queries
// (the causal rows end at tokens - 5 + i), and a sparse subset.
TEST(AttentionSinks, KernelsAtEveryLevelMatchTheNaiveSoftmax) {
  for (int hd : {16, 24, 64, 128}) {
    const int page = 16, n_q_heads = 2;
    const int64_t tokens = 75, n_q = 5;
    PagePool pool(hd, page, DType::F32, DType::F32);
    HeadCache head;
    const auto k = normal_vec(size_t(tokens * hd), 81), v = normal_vec(size_t(tokens * hd), 82);
    for (int64_t t = 0; t < tokens; ++t) head.append(k.data() + t * hd, v.data() + t * hd, t, pool);
    const auto q = normal_vec(size_t(n_q * n_q_heads * hd), 83, 0.5f);
    const std::vector<float> sinks = {2.0f, -1.0f};
    const std::vector<int32_t> picked = {0, 3, 5, 9, 17, 18, 30, 40, 51, 66, 74};
    for (int window : {0, 20}) {
      const PagedKv kv{head, hd, page, window, sinks.data()};
      for (Isa isa : supported_isas()) {
        ScopedIsa level(isa);
        SCOPED_TRACE(testing::Message() << isa_name(isa) << " hd " << hd << " window " << window);
        AttentionScratch scratch;
        std::vector<float> decode(size_t(n_q_heads * hd));
        attend_dense(kv, q.data(), hd, n_q_heads, 1, decode.data(), hd, scratch);
        const int64_t q_stride = int64_t(n_q_heads) * hd;
        std::vector<float> prefill(size_t(n_q * q_stride));
        attend_dense(kv, q.data(), q_stride, n_q_heads, n_q, prefill.data(), q_stride, scratch);
        std::vector<float> sparse(size_t(n_q_heads * hd));
        attend_sparse(kv, picked, q.data(), n_q_heads, sparse.data(), scratch);
        for (int g = 0; g < n_q_heads; ++g) {
          const int64_t first = window > 0 ? tokens - window : 0;
          const auto want_decode = reference(k, v, q.data() + g * hd, hd, range(first, tokens), sinks[size_t(g)]);
          const auto want_sparse = reference(k, v, q.data() + g * hd, hd, picked, sinks[size_t(g)]);
          for (int d = 0; d < hd; ++d) {
            EXPECT_NEAR(decode[size_t(g * hd + d)], want_decode.out[size_t(d)], 2e-5) << "decode head " << g;
            EXPECT_NEAR(sparse[size_t(g * hd + d)], want_sparse.out[size_t(d)], 2e-5) << "sparse head " << g;
          }
          for (int64_t i = 0; i < n_q; ++i) {
            const int64_t last = tokens - n_q + i;  // the query's own token
            const int64_t lo = window > 0 ? std::max<int64_t>(0, last + 1 - window) : 0;
            const auto want =
                reference(k, v, q.data() + i * q_stride + g * hd, hd, range(lo, last + 1), sinks[size_t(g)]);
            for (int d = 0; d < hd; ++d)
              EXPECT_NEAR(prefill[size_t(i * q_stride + g * hd + d)], want.out[size_t(d)], 2e-5)
                  << "prefill query " << i << " head " << g;
          }
        }
      }
    }
    head.clear(pool);
  }
}

// Records every probe row.
class RecordingProbe final : public AttentionProbe {
 public:
  struct Row {
    int q_head;
    int64_t position;
    std::vector<float> probs;
  };
  void on_row(int, int q_head, int64_t position, const float* probs, int64_t n_visible) override {
    std::lock_guard<std::mutex> lock(mutex_);
    rows.push_back({q_head, position, std::vector<float>(probs, probs + n_visible)});
  }
  std::vector<Row> rows;

 private:
  std::mutex mutex_;
};

// The paged cache with per-layer sinks (layer 0 has sinks, layer 1 none): a prefill block, a
// decode step, then an eviction that leaves the KV heads different tokens, and more steps. The
// output and every probe row (what SnapKV, H2O, TOVA, PyramidKV, AdaKV, DapQ and LookaheadKV
// read) match the naive softmax with the sink; the rows sum to 1 - the sink's share.
TEST(AttentionSinks, PagedCacheBlocksDecodeAndEvictionMatchTheNaiveSoftmax) {
  const int kv_heads = 2, group = 2, hd = 32, n_heads = kv_heads * group;
  KvShape shape{2, n_heads, kv_heads, hd, DType::F32, DType::F32, {}, {{1.0f, -0.5f, 3.0f, 0.0f}, {}}};
  PagedKvCache cache(shape, 400, 16);
  ThreadPool pool(2);
  RecordingProbe probe;
  cache.set_probe(&probe);
  EXPECT_EQ(cache.sink_logit(0, 2), 3.0f);
  EXPECT_EQ(cache.sink_logit(1, 2), kNoSink);
  EXPECT_EQ(cache.sinks(1), nullptr);

  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  // The naive shadow of each layer's KV heads: rows by cache index.
  std::vector<std::vector<std::vector<float>>> keys(2, std::vector<std::vector<float>>(kv_heads)), values = keys;
  int64_t next = 0;
  auto step = [&](int n) {
    const size_t kv_dim = size_t(kv_heads) * hd, q_dim = size_t(n_heads) * hd;
    std::vector<int64_t> pos(static_cast<size_t>(n));
    for (int t = 0; t < n; ++t) pos[size_t(t)] = next + t;
    next += n;
    for (int layer = 0; layer < 2; ++layer) {
      std::vector<float> k(size_t(n) * kv_dim), v(k.size()), q(size_t(n) * q_dim), out(q.size());
      for (float& x : k) x = dist(rng);
      for (float& x : v) x = dist(rng);
      for (float& x : q) x = dist(rng);
      cache.append(layer, k.data(), v.data(), n, pos.data());
      for (int h = 0; h < kv_heads; ++h)
        for (int t = 0; t < n; ++t) {
          keys[size_t(layer)][size_t(h)].insert(keys[size_t(layer)][size_t(h)].end(), &k[t * kv_dim + h * hd],
                                                &k[t * kv_dim + h * hd] + hd);
          values[size_t(layer)][size_t(h)].insert(values[size_t(layer)][size_t(h)].end(), &v[t * kv_dim + h * hd],
                                                  &v[t * kv_dim + h * hd] + hd);
        }
      probe.rows.clear();
      cache.attend(layer, q.data(), n, out.data(), pool);
      ASSERT_EQ(probe.rows.size(), size_t(n) * n_heads);
      for (int h = 0; h < n_heads; ++h) {
        const auto& kh = keys[size_t(layer)][size_t(h / group)];
        const auto& vh = values[size_t(layer)][size_t(h / group)];
        const int64_t size = int64_t(kh.size()) / hd;
        for (int i = 0; i < n; ++i) {
          const auto want = reference(kh, vh, &q[i * q_dim + size_t(h) * hd], hd, range(0, size - n + i + 1),
                                      cache.sink_logit(layer, h));
          for (int d = 0; d < hd; ++d)
            ASSERT_NEAR(out[i * q_dim + size_t(h) * hd + d], want.out[size_t(d)], 2e-5)
                << "layer " << layer << " head " << h << " query " << i;
          for (const auto& row : probe.rows) {
            if (row.q_head != h || row.position != pos[size_t(i)]) continue;
            ASSERT_EQ(row.probs.size(), want.probs.size());
            double sum = 0;
            for (size_t j = 0; j < row.probs.size(); ++j) {
              EXPECT_NEAR(row.probs[j], want.probs[j], 1e-6);
              sum += row.probs[j];
            }
            EXPECT_NEAR(sum, 1.0 - want.sink_share, 1e-5) << "layer " << layer << " head " << h;
            if (layer == 0) {
              EXPECT_GT(want.sink_share, 1e-3);  // the sinks take visible mass
            }
          }
        }
      }
    }
  };
  step(40);  // a prefill block
  step(1);   // decode
  // Eviction: each KV head of layer 0 keeps a different subset.
  for (int h = 0; h < kv_heads; ++h) {
    std::vector<int32_t> keep;
    for (int32_t i = 0; i < 41; ++i)
      if (i < 4 || i % (h + 2) == 0 || i > 36) keep.push_back(i);
    cache.head(0, h).retain(keep, cache.pool());
    std::vector<float> kk, vv;
    for (int32_t i : keep) {
      kk.insert(kk.end(), &keys[0][size_t(h)][size_t(i) * hd], &keys[0][size_t(h)][size_t(i) * hd] + hd);
      vv.insert(vv.end(), &values[0][size_t(h)][size_t(i) * hd], &values[0][size_t(h)][size_t(i) * hd] + hd);
    }
    keys[0][size_t(h)] = kk;
    values[0][size_t(h)] = vv;
  }
  step(1);
  step(7);
  cache.set_probe(nullptr);
}

TEST(AttentionSinks, BadSinkShapesAreErrors) {
  KvShape shape{2, 4, 2, 16, DType::F32, DType::F32, {}, {{1, 2, 3}, {}}};
  try {
    PagedKvCache cache(shape, 10, 16);
    ADD_FAILURE() << "three sink logits for four heads were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 0 has 3 sink logits for 4 query heads"), std::string::npos) << e.what();
  }
  shape.layer_sinks = {{1, 2, 3, 4}};
  EXPECT_THROW(PagedKvCache(shape, 10, 16), Error);  // one layer's sinks for two layers
}

// The softmax the sparse selectors (exact_topk, SparQ) average over a group: with the sink, each
// head's row adds 1 - its sink share, as the kernels' rows do.
TEST(AttentionSinks, SelectorSoftmaxLeavesTheSinkShareOut) {
  const std::vector<float> logits = {0.5f, -1.0f, 2.0f, 0.0f};
  const float sink = 1.0f;
  std::vector<float> acc(4, 0.0f), row = logits;
  add_softmax(row, 0.5f, acc, sink);
  double denom = std::exp(double(sink));
  for (float l : logits) denom += std::exp(double(l));
  double total = 0;
  for (size_t j = 0; j < 4; ++j) {
    EXPECT_NEAR(acc[j], 0.5 * std::exp(double(logits[j])) / denom, 1e-7);
    total += acc[j];
  }
  EXPECT_NEAR(total, 0.5 * (1.0 - std::exp(double(sink)) / denom), 1e-7);
  // No sink: the halves sum to 1/2.
  std::vector<float> acc2(4, 0.0f), row2 = logits;
  add_softmax(row2, 0.5f, acc2, kNoSink);
  EXPECT_NEAR(acc2[0] + acc2[1] + acc2[2] + acc2[3], 0.5, 1e-7);
}

}  // namespace
}  // namespace kvslim
