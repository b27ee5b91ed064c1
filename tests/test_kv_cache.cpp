// The paged KV cache: page pool accounting, per-head storage with retain/truncate, and dense,
// probed and sparse attention checked against a naive double-precision reference that keeps
// its own copy of what every head holds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <vector>

#include "kv/head_cache.h"
#include "kv/page_pool.h"
#include "kv/paged_cache.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace kvslim {
namespace {

std::vector<float> random_floats(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// ---- PagePool ----

TEST(KvCachePagePool, BytesAccounting) {
  PagePool pool(64, 16);
  EXPECT_GE(pool.page_bytes(), 2 * 16 * 64 * sizeof(float) + 16 * sizeof(int64_t));
  EXPECT_EQ(pool.bytes_in_use(), 0u);
  KvPage* a = pool.acquire();
  KvPage* b = pool.acquire();
  KvPage* c = pool.acquire();
  EXPECT_EQ(pool.bytes_in_use(), 3 * pool.page_bytes());
  EXPECT_EQ(pool.bytes_mapped(), 3 * pool.page_bytes());
  // The three parts of a page are writable and do not overlap.
  for (KvPage* p : {a, b, c}) {
    std::fill_n(reinterpret_cast<float*>(p->keys), 16 * 64, 1.0f);
    std::fill_n(reinterpret_cast<float*>(p->values), 16 * 64, 2.0f);
    std::fill(p->positions, p->positions + 16, int64_t(3));
  }
  for (KvPage* p : {a, b, c}) {
    EXPECT_EQ(reinterpret_cast<float*>(p->keys)[16 * 64 - 1], 1.0f);
    EXPECT_EQ(reinterpret_cast<float*>(p->values)[0], 2.0f);
    EXPECT_EQ(reinterpret_cast<float*>(p->values)[16 * 64 - 1], 2.0f);
    EXPECT_EQ(p->positions[0], 3);
  }
  pool.release(b);
  EXPECT_EQ(pool.bytes_in_use(), 2 * pool.page_bytes());
  EXPECT_EQ(pool.peak_bytes_in_use(), 3 * pool.page_bytes());
  pool.release(a);
  pool.release(c);
  EXPECT_EQ(pool.bytes_in_use(), 0u);
  EXPECT_EQ(pool.peak_bytes_in_use(), 3 * pool.page_bytes());
}

TEST(KvCachePagePool, ReleasedPagesAreReusedWithinTheReserve) {
  PagePool pool(32, 8);
  pool.reserve(2);
  KvPage* a = pool.acquire();
  a->positions[0] = 42;
  pool.release(a);
  EXPECT_EQ(pool.bytes_mapped(), 2 * pool.page_bytes());
  KvPage* again = pool.acquire();
  EXPECT_EQ(again, a);  // the free list is used first
  pool.release(again);
}

TEST(KvCachePagePool, ReserveMapsUpFront) {
  PagePool pool(32, 8);
  pool.reserve(4);
  EXPECT_EQ(pool.bytes_mapped(), 4 * pool.page_bytes());
  EXPECT_EQ(pool.bytes_in_use(), 0u);
  std::vector<KvPage*> pages;
  for (int i = 0; i < 4; ++i) pages.push_back(pool.acquire());
  EXPECT_EQ(pool.bytes_mapped(), 4 * pool.page_bytes());  // nothing new mapped
  EXPECT_EQ(std::set<KvPage*>(pages.begin(), pages.end()).size(), 4u);
  pages.push_back(pool.acquire());
  EXPECT_EQ(pool.bytes_mapped(), 5 * pool.page_bytes());
  for (KvPage* p : pages) pool.release(p);
  EXPECT_EQ(pool.bytes_in_use(), 0u);
  EXPECT_EQ(pool.bytes_mapped(), 4 * pool.page_bytes());  // the reserve stays mapped
  pool.reserve(1);                                        // a lower reserve unmaps the surplus
  EXPECT_EQ(pool.bytes_mapped(), 1 * pool.page_bytes());
}

TEST(KvCachePagePool, PagesBeyondTheReserveAreUnmapped) {
  PagePool pool(64, 32);
  std::vector<KvPage*> pages;
  for (int i = 0; i < 6; ++i) {
    pages.push_back(pool.acquire());
    std::fill_n(reinterpret_cast<float*>(pages.back()->keys), 32 * 64, float(i));  // touch the memory
  }
  EXPECT_EQ(pool.bytes_mapped(), 6 * pool.page_bytes());
  pool.release(pages[5]);
  pool.release(pages[4]);
  EXPECT_EQ(pool.bytes_mapped(), 4 * pool.page_bytes());
  EXPECT_EQ(pool.bytes_in_use(), 4 * pool.page_bytes());
  for (int i = 0; i < 4; ++i) pool.release(pages[size_t(i)]);
  EXPECT_EQ(pool.bytes_mapped(), 0u);
}

TEST(KvCachePagePool, BadShapeIsAnError) {
  EXPECT_THROW(PagePool(0, 16), Error);
  EXPECT_THROW(PagePool(64, 0), Error);
}

// ---- HeadCache ----

// The naive copy a HeadCache is checked against.
struct NaiveHead {
  std::vector<std::vector<float>> keys, values;
  std::vector<int64_t> positions;
  size_t size() const { return positions.size(); }
  void append(const float* k, const float* v, int64_t pos, int hd) {
    keys.emplace_back(k, k + hd);
    values.emplace_back(v, v + hd);
    positions.push_back(pos);
  }
  void retain(const std::vector<int32_t>& keep) {
    NaiveHead n;
    for (int32_t i : keep) {
      n.keys.push_back(keys[size_t(i)]);
      n.values.push_back(values[size_t(i)]);
      n.positions.push_back(positions[size_t(i)]);
    }
    *this = n;
  }
};

void expect_same(const HeadCache& head, const NaiveHead& naive, int hd) {
  ASSERT_EQ(head.size(), int64_t(naive.size()));
  for (size_t i = 0; i < naive.size(); ++i) {
    ASSERT_EQ(head.position(int64_t(i)), naive.positions[i]) << "token " << i;
    ASSERT_EQ(std::memcmp(head.key_data(int64_t(i)), naive.keys[i].data(), hd * sizeof(float)), 0) << "key " << i;
    ASSERT_EQ(std::memcmp(head.value_data(int64_t(i)), naive.values[i].data(), hd * sizeof(float)), 0) << "value " << i;
  }
}

void fill(HeadCache& head, NaiveHead& naive, PagePool& pool, int n, std::mt19937& rng, int64_t pos0 = 0) {
  const int hd = pool.head_dim();
  for (int t = 0; t < n; ++t) {
    const auto k = random_floats(rng, size_t(hd));
    const auto v = random_floats(rng, size_t(hd));
    head.append(k.data(), v.data(), pos0 + 10 * t + 3, pool);
    naive.append(k.data(), v.data(), pos0 + 10 * t + 3, hd);
  }
}

uint64_t pages_for(int64_t tokens, const PagePool& pool) {
  return uint64_t((tokens + pool.page_tokens() - 1) / pool.page_tokens()) * pool.page_bytes();
}

TEST(KvCacheHeadCache, AppendAcrossPageBoundaries) {
  std::mt19937 rng(1);
  PagePool pool(8, 4);
  HeadCache head;
  NaiveHead naive;
  fill(head, naive, pool, 11, rng);
  expect_same(head, naive, 8);
  EXPECT_EQ(head.pages().size(), 3u);
  EXPECT_EQ(pool.bytes_in_use(), 3 * pool.page_bytes());
  // Token i lives in pages()[i / page_tokens] at row i % page_tokens.
  EXPECT_EQ(head.key_data(9), head.pages()[2]->keys + 1 * 8 * sizeof(float));
  EXPECT_EQ(head.pages()[1]->positions[3], head.position(7));
  head.clear(pool);
  EXPECT_EQ(pool.bytes_in_use(), 0u);
}

TEST(KvCacheHeadCache, RetainArbitrarySubsets) {
  std::mt19937 rng(2);
  const int n = 37;
  std::vector<std::vector<int32_t>> subsets = {
      {},                                      // nothing
      {0},                                     // first only
      {36},                                    // last only
      {4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14},  // a run across page boundaries
      {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18,
       19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36},  // everything
      {0, 1, 2, 3, 30, 31, 32, 33, 34, 35, 36},                                  // sinks and a window
  };
  for (int r = 0; r < 20; ++r) {  // random subsets of random sizes
    std::vector<int32_t> s;
    const double keep = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    for (int32_t i = 0; i < n; ++i)
      if (std::uniform_real_distribution<double>(0.0, 1.0)(rng) < keep) s.push_back(i);
    subsets.push_back(s);
  }
  for (const auto& keep : subsets) {
    PagePool pool(16, 5);
    HeadCache head;
    NaiveHead naive;
    fill(head, naive, pool, n, rng);
    head.retain(keep, pool);
    naive.retain(keep);
    expect_same(head, naive, 16);
    EXPECT_EQ(pool.bytes_in_use(), pages_for(int64_t(keep.size()), pool));
    // Appending after a retain continues right after the kept tokens.
    fill(head, naive, pool, 7, rng, 1000);
    expect_same(head, naive, 16);
    EXPECT_EQ(pool.bytes_in_use(), pages_for(int64_t(keep.size()) + 7, pool));
    head.clear(pool);
  }
}

TEST(KvCacheHeadCache, Truncate) {
  std::mt19937 rng(3);
  PagePool pool(16, 4);
  HeadCache head;
  NaiveHead naive;
  fill(head, naive, pool, 10, rng);
  head.truncate(5, pool);
  naive.retain({0, 1, 2, 3, 4});
  expect_same(head, naive, 16);
  EXPECT_EQ(pool.bytes_in_use(), 2 * pool.page_bytes());
  head.truncate(5, pool);  // no-op
  expect_same(head, naive, 16);
  fill(head, naive, pool, 6, rng, 500);
  expect_same(head, naive, 16);
  EXPECT_THROW(head.truncate(12, pool), Error);
  EXPECT_THROW(head.truncate(-1, pool), Error);
  head.truncate(0, pool);
  EXPECT_EQ(head.size(), 0);
  EXPECT_EQ(pool.bytes_in_use(), 0u);
}

TEST(KvCacheHeadCache, InvalidRetainIndicesThrowAndChangeNothing) {
  std::mt19937 rng(4);
  PagePool pool(16, 4);
  HeadCache head;
  NaiveHead naive;
  fill(head, naive, pool, 9, rng);
  const std::vector<std::vector<int32_t>> bad = {{2, 1}, {1, 1}, {-1, 3}, {0, 9}, {3, 4, 100}};
  for (const auto& keep : bad) {
    EXPECT_THROW(head.retain(keep, pool), Error);
    expect_same(head, naive, 16);
  }
  head.clear(pool);
}

// ---- PagedKvCache attention against a double-precision reference ----

KvShape shape(int n_kv_heads, int group, int head_dim, int n_layers = 2, DType k = DType::F32, DType v = DType::F32) {
  return {n_layers, n_kv_heads * group, n_kv_heads, head_dim, k, v, {}, {}};
}

// softmax(q·k/sqrt(d)) over the given tokens of a naive head, and the weighted values.
struct Reference {
  std::vector<double> probs, out;
};

Reference reference(const NaiveHead& h, const float* q, int hd, const std::vector<int32_t>& tokens) {
  Reference r;
  std::vector<double> s(tokens.size());
  double mx = -1e300;
  for (size_t j = 0; j < tokens.size(); ++j) {
    double d = 0;
    for (int i = 0; i < hd; ++i) d += double(q[i]) * h.keys[size_t(tokens[j])][size_t(i)];
    s[j] = d / std::sqrt(double(hd));
    mx = std::max(mx, s[j]);
  }
  double sum = 0;
  for (double& x : s) sum += (x = std::exp(x - mx));
  r.out.assign(size_t(hd), 0.0);
  for (size_t j = 0; j < tokens.size(); ++j) {
    s[j] /= sum;
    for (int i = 0; i < hd; ++i) r.out[size_t(i)] += s[j] * h.values[size_t(tokens[j])][size_t(i)];
  }
  r.probs = s;
  return r;
}

std::vector<int32_t> first_n(int64_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = int32_t(i);
  return v;
}

// x rounded to `type` and back, row by row of hd (f32: unchanged).
void round_through(DType type, std::vector<float>& x, int hd) {
  std::vector<uint8_t> stored(row_bytes(type, hd));
  for (size_t r = 0; r < x.size() / size_t(hd); ++r) {
    convert_from_f32(&x[r * hd], type, stored.data(), hd);
    convert_to_f32(type, stored.data(), &x[r * hd], hd);
  }
}

// A PagedKvCache with its naive shadow: [layer][kv head].
struct Fixture {
  KvShape config;
  PagedKvCache cache;
  std::vector<std::vector<NaiveHead>> naive;
  std::mt19937 rng{11};
  int64_t next_pos = 0;

  Fixture(const KvShape& c, int64_t capacity, int page_tokens)
      : config(c),
        cache(c, capacity, page_tokens),
        naive(size_t(c.n_layers), std::vector<NaiveHead>(size_t(c.n_kv_heads))) {}

  // Appends a block of n tokens to every layer; returns the queries [n][n_heads*hd] per layer.
  std::vector<std::vector<float>> append_block(int n) {
    const int hd = config.head_dim;
    const size_t kv_dim = size_t(config.n_kv_heads) * hd;
    std::vector<int64_t> pos(static_cast<size_t>(n));
    for (int t = 0; t < n; ++t) pos[size_t(t)] = next_pos + t;
    next_pos += n;
    std::vector<std::vector<float>> queries;
    for (int l = 0; l < config.n_layers; ++l) {
      auto k = random_floats(rng, size_t(n) * kv_dim);
      auto v = random_floats(rng, size_t(n) * kv_dim);
      cache.append(l, k.data(), v.data(), n, pos.data());
      // The shadow holds what the pages hold: the rows rounded through their stored types.
      round_through(config.key_type, k, hd);
      round_through(config.value_type, v, hd);
      for (int h = 0; h < config.n_kv_heads; ++h)
        for (int t = 0; t < n; ++t)
          naive[size_t(l)][size_t(h)].append(&k[t * kv_dim + size_t(h) * hd], &v[t * kv_dim + size_t(h) * hd],
                                             pos[size_t(t)], hd);
      queries.push_back(random_floats(rng, size_t(n) * config.n_heads * hd));
    }
    return queries;
  }

  void retain(int layer, int kv_head, const std::vector<int32_t>& keep) {
    cache.head(layer, kv_head).retain(keep, cache.pool());
    naive[size_t(layer)][size_t(kv_head)].retain(keep);
  }

  // Dense attention of the block of n queries just appended, checked against the reference.
  void check_dense(int layer, const std::vector<float>& q, int n, ThreadPool& pool, double tol = 2e-5) {
    const int hd = config.head_dim, group = config.n_heads / config.n_kv_heads;
    const size_t q_dim = size_t(config.n_heads) * hd;
    std::vector<float> out(size_t(n) * q_dim, NAN);
    cache.attend(layer, q.data(), n, out.data(), pool);
    for (int h = 0; h < config.n_heads; ++h) {
      const NaiveHead& nh = naive[size_t(layer)][size_t(h / group)];
      for (int i = 0; i < n; ++i) {
        const auto want = reference(nh, &q[i * q_dim + size_t(h) * hd], hd, first_n(int64_t(nh.size()) - n + i + 1));
        for (int d = 0; d < hd; ++d)
          ASSERT_NEAR(out[i * q_dim + size_t(h) * hd + size_t(d)], want.out[size_t(d)], tol)
              << "layer " << layer << " head " << h << " query " << i << " dim " << d;
      }
    }
  }
};

struct AttentionCase {
  int n_kv_heads, group, head_dim, page_tokens, threads;
  DType key_type = DType::F32, value_type = DType::F32;
};

class KvCacheAttention : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(KvCacheAttention, DenseMatchesReferenceAfterPerHeadRetain) {
  const AttentionCase& p = GetParam();
  Fixture f(shape(p.n_kv_heads, p.group, p.head_dim, 2, p.key_type, p.value_type), 400, p.page_tokens);
  ThreadPool pool(p.threads);
  // A prefill block longer than the query tile, then single tokens.
  auto q = f.append_block(150);
  for (int l = 0; l < 2; ++l) f.check_dense(l, q[size_t(l)], 150, pool);
  q = f.append_block(1);
  for (int l = 0; l < 2; ++l) f.check_dense(l, q[size_t(l)], 1, pool);

  // Heads of layer 0 keep different tokens and counts; layer 1 keeps everything.
  const uint64_t before = f.cache.bytes_in_use();
  const int64_t n = f.cache.head(0, 0).size();
  for (int h = 0; h < p.n_kv_heads; ++h) {
    std::vector<int32_t> keep;
    for (int32_t i = 0; i < n; ++i)
      if (i < 4 || i >= n - 10 * (h + 1) || i % (h + 2) == 0) keep.push_back(i);
    f.retain(0, h, keep);
  }
  int64_t total = 0, most = 0;
  uint64_t bytes = 0;
  for (int h = 0; h < p.n_kv_heads; ++h) {
    total += f.cache.head(0, h).size();
    most = std::max(most, f.cache.head(0, h).size());
    bytes += pages_for(f.cache.head(0, h).size(), f.cache.pool()) + pages_for(n, f.cache.pool());
  }
  EXPECT_EQ(f.cache.bytes_in_use(), bytes);
  if (p.page_tokens < 64) {
    EXPECT_LT(f.cache.bytes_in_use(), before);
  }
  EXPECT_EQ(f.cache.n_tokens(0), most);
  EXPECT_EQ(f.cache.n_tokens(1), n);
  EXPECT_EQ(f.cache.total_tokens(), total + n * p.n_kv_heads);

  // Blocks and decode steps over heads of different sizes.
  for (int block : {7, 1, 1, 33, 1}) {
    q = f.append_block(block);
    for (int l = 0; l < 2; ++l) f.check_dense(l, q[size_t(l)], block, pool);
  }
}

INSTANTIATE_TEST_SUITE_P(KvCacheShapes, KvCacheAttention,
                         ::testing::Values(AttentionCase{2, 1, 64, 16, 2}, AttentionCase{2, 2, 64, 16, 2},
                                           AttentionCase{2, 4, 64, 32, 3}, AttentionCase{1, 4, 128, 16, 2},
                                           AttentionCase{2, 2, 16, 8, 1}, AttentionCase{2, 4, 32, 16, 2},
                                           AttentionCase{2, 3, 24, 16, 2}, AttentionCase{1, 8, 64, 256, 4},
                                           // Enough KV heads for the threads that prefill takes a
                                           // whole group per unit: its heads' queries stacked in
                                           // one tile (the shapes above split groups to one head).
                                           AttentionCase{8, 2, 16, 16, 1}, AttentionCase{16, 4, 32, 16, 2},
                                           // Stored types: the kernels read f16, bf16 and q8_0 rows
                                           // directly (register paths for d = 16/32/64/128, the
                                           // generic path for d = 24), K and V types chosen apart.
                                           AttentionCase{2, 2, 64, 16, 2, DType::F16, DType::F16},
                                           AttentionCase{2, 4, 32, 16, 2, DType::BF16, DType::BF16},
                                           AttentionCase{1, 4, 128, 16, 2, DType::Q8_0, DType::Q8_0},
                                           AttentionCase{2, 2, 64, 32, 2, DType::F16, DType::Q8_0},
                                           AttentionCase{2, 2, 16, 8, 1, DType::BF16, DType::F16},
                                           AttentionCase{2, 3, 24, 16, 2, DType::F16, DType::BF16},
                                           AttentionCase{2, 2, 64, 16, 2, DType::Q8_0, DType::F32}),
                         [](const ::testing::TestParamInfo<AttentionCase>& info) {
                           const auto& c = info.param;
                           return "kv" + std::to_string(c.n_kv_heads) + "_G" + std::to_string(c.group) + "_d" +
                                  std::to_string(c.head_dim) + "_page" + std::to_string(c.page_tokens) + "_t" +
                                  std::to_string(c.threads) + "_" + dtype_name(c.key_type) + "_" +
                                  dtype_name(c.value_type);
                         });

// Records every row the cache reports.
class RecordingProbe final : public AttentionProbe {
 public:
  struct Row {
    int layer, q_head;
    int64_t position;
    std::vector<float> probs;
  };
  void on_row(int layer, int q_head, int64_t query_position, const float* probs, int64_t n_visible) override {
    std::lock_guard<std::mutex> lock(mutex_);
    rows.push_back({layer, q_head, query_position, std::vector<float>(probs, probs + n_visible)});
  }
  std::vector<Row> rows;

 private:
  std::mutex mutex_;
};

TEST(KvCacheProbe, RowsSumToOneAndEqualTheReferenceProbabilities) {
  const int kv_heads = 2, group = 2, hd = 32;
  Fixture f(shape(kv_heads, group, hd), 200, 16);
  ThreadPool pool(2);
  RecordingProbe probe;
  f.cache.set_probe(&probe);
  f.append_block(40);  // unchecked prefix; then make heads differ
  for (int h = 0; h < kv_heads; ++h) {
    std::vector<int32_t> keep;
    for (int32_t i = 0; i < 40; ++i)
      if (i % (h + 2) != 1) keep.push_back(i);
    f.retain(1, h, keep);
  }
  for (int n : {9, 1}) {
    const auto q = f.append_block(n);
    probe.rows.clear();
    const int layer = 1;
    std::vector<float> out(size_t(n) * kv_heads * group * hd);
    f.cache.attend(layer, q[layer].data(), n, out.data(), pool);
    ASSERT_EQ(probe.rows.size(), size_t(n) * kv_heads * group);
    std::set<std::pair<int, int64_t>> seen;
    for (const auto& row : probe.rows) {
      EXPECT_EQ(row.layer, layer);
      const NaiveHead& nh = f.naive[layer][size_t(row.q_head / group)];
      // Which query of the block: the one whose original position is row.position.
      const int64_t first = int64_t(nh.size()) - n;
      int64_t i = -1;
      for (int64_t t = 0; t < n; ++t)
        if (nh.positions[size_t(first + t)] == row.position) i = t;
      ASSERT_GE(i, 0) << "position " << row.position;
      seen.insert({row.q_head, i});
      ASSERT_EQ(int64_t(row.probs.size()), first + i + 1);
      const size_t q_dim = size_t(kv_heads) * group * hd;
      const auto want =
          reference(nh, &q[layer][size_t(i) * q_dim + size_t(row.q_head) * hd], hd, first_n(first + i + 1));
      double sum = 0;
      for (size_t j = 0; j < row.probs.size(); ++j) {
        sum += row.probs[j];
        EXPECT_NEAR(row.probs[j], want.probs[j], 1e-6);
      }
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
    EXPECT_EQ(seen.size(), size_t(n) * kv_heads * group);  // every (head, query) once
  }
}

// Selects fixed index lists per KV head (or declines).
class FixedSelector final : public SparseSelector {
 public:
  bool select(int layer, const float* q, const PagedKvCache& cache, std::vector<std::vector<int32_t>>& selected,
              ThreadPool&) override {
    ++calls;
    if (!use) return false;
    for (int h = 0; h < cache.n_kv_heads(); ++h)
      selected[size_t(h)] = all ? first_n(cache.head(layer, h).size()) : lists[size_t(h)];
    return true;
  }
  bool use = true, all = true;
  int calls = 0;
  std::vector<std::vector<int32_t>> lists;
};

TEST(KvCacheSparse, AllIndicesEqualDenseAndSubsetsEqualTheReference) {
  struct Case {
    int hd, threads;
    DType k, v;
  };
  for (const Case& c :
       {Case{64, 2, DType::F32, DType::F32}, Case{24, 2, DType::F32, DType::F32}, Case{64, 5, DType::F32, DType::F32},
        Case{64, 2, DType::F16, DType::F16}, Case{32, 2, DType::BF16, DType::Q8_0},
        Case{64, 2, DType::Q8_0, DType::F16}, Case{24, 2, DType::F16, DType::BF16}}) {
    const int hd = c.hd, threads = c.threads;
    SCOPED_TRACE(testing::Message() << "d " << hd << " " << dtype_name(c.k) << "/" << dtype_name(c.v));
    const int kv_heads = 2, group = 4;
    Fixture f(shape(kv_heads, group, hd, 2, c.k, c.v), 300, 32);
    ThreadPool pool(threads);  // 5 threads split each KV head's group over several threads
    f.append_block(100);
    f.retain(0, 1, [] {
      std::vector<int32_t> k;
      for (int32_t i = 0; i < 100; i += 3) k.push_back(i);
      return k;
    }());
    const auto q = f.append_block(1);
    const size_t q_dim = size_t(kv_heads) * group * hd;
    std::vector<float> dense(q_dim), sparse(q_dim);
    f.cache.attend(0, q[0].data(), 1, dense.data(), pool);

    FixedSelector selector;
    f.cache.set_sparse_selector(&selector);
    f.cache.attend(0, q[0].data(), 1, sparse.data(), pool);
    EXPECT_EQ(selector.calls, 1);  // once per layer step, not per thread
    for (size_t i = 0; i < q_dim; ++i) EXPECT_NEAR(sparse[i], dense[i], 1e-6);

    selector.all = false;
    selector.lists = {{0, 1, 2, 50, 51, 99, 100}, {}};
    selector.lists[1] = {5, 6, 7, 20, int32_t(f.cache.head(0, 1).size() - 1)};
    f.cache.attend(0, q[0].data(), 1, sparse.data(), pool);
    for (int h = 0; h < kv_heads * group; ++h) {
      const auto want =
          reference(f.naive[0][size_t(h / group)], &q[0][size_t(h) * hd], hd, selector.lists[size_t(h / group)]);
      for (int d = 0; d < hd; ++d) EXPECT_NEAR(sparse[size_t(h) * hd + size_t(d)], want.out[size_t(d)], 2e-5);
    }

    // An empty selection attends to nothing; a declining selector means dense.
    selector.lists = {{}, {}};
    f.cache.attend(0, q[0].data(), 1, sparse.data(), pool);
    for (float x : sparse) EXPECT_EQ(x, 0.0f);
    selector.use = false;
    f.cache.attend(0, q[0].data(), 1, sparse.data(), pool);
    EXPECT_EQ(sparse, dense);

    // Bad selections are errors.
    selector.use = true;
    selector.lists = {{3, 2}, {}};
    EXPECT_THROW(f.cache.attend(0, q[0].data(), 1, sparse.data(), pool), Error);
    selector.lists = {{0, 1000}, {}};
    EXPECT_THROW(f.cache.attend(0, q[0].data(), 1, sparse.data(), pool), Error);
    f.cache.set_sparse_selector(nullptr);
  }
}

TEST(KvCachePaged, CapacityIsEnforcedPerHead) {
  Fixture f(shape(2, 2, 16, 1), 10, 4);
  f.append_block(8);
  EXPECT_THROW(f.append_block(3), Error);
  f.retain(0, 0, {0, 1, 2});
  EXPECT_THROW(f.append_block(3), Error);  // head 1 is still full
  f.retain(0, 1, {7});
  f.append_block(3);
  EXPECT_EQ(f.cache.n_tokens(0), 6);
  EXPECT_EQ(f.cache.total_tokens(), 6 + 4);
}

TEST(KvCachePaged, BytesFollowTheTokensKept) {
  Fixture f(shape(2, 1, 64, 2), 1000, 16);
  f.append_block(100);
  const uint64_t page = f.cache.pool().page_bytes();
  EXPECT_EQ(f.cache.bytes_in_use(), 2 * 2 * 7 * page);  // 100 tokens = 7 pages per head
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 2; ++h) f.retain(l, h, {0, 1, 2, 3, 97, 98, 99});
  EXPECT_EQ(f.cache.bytes_in_use(), 2 * 2 * 1 * page);
  EXPECT_EQ(f.cache.peak_bytes(), 2 * 2 * 7 * page);
  EXPECT_EQ(f.cache.total_tokens(), 4 * 7);
}

TEST(KvCachePaged, BadShapesAreErrors) {
  EXPECT_THROW(PagedKvCache(shape(0, 1, 16), 8), Error);
  KvShape c = shape(3, 1, 16);
  c.n_heads = 4;  // not a multiple of the KV heads
  EXPECT_THROW(PagedKvCache(c, 8), Error);
  EXPECT_THROW(PagedKvCache(shape(1, 1, 16), 0), Error);
}

}  // namespace
}  // namespace kvslim

namespace kvslim {
namespace {

// ---- KV page types: bytes and error against the unrounded f32 rows ----

TEST(KvCacheTypes, PageBytesFollowTheStoredType) {
  // 256 tokens of head_dim 64: keys + values + positions, rounded up to whole OS pages.
  const PagePool f32(64, 256), f16(64, 256, DType::F16, DType::F16), bf16(64, 256, DType::BF16, DType::BF16),
      q8(64, 256, DType::Q8_0, DType::Q8_0), mixed(64, 256, DType::F16, DType::Q8_0);
  EXPECT_EQ(f32.key_row_bytes(), 256u);
  EXPECT_EQ(f16.key_row_bytes(), 128u);
  EXPECT_EQ(bf16.value_row_bytes(), 128u);
  EXPECT_EQ(q8.key_row_bytes(), 68u);  // two blocks of 32: 2 * (2 + 32)
  EXPECT_EQ(mixed.key_row_bytes(), 128u);
  EXPECT_EQ(mixed.value_row_bytes(), 68u);
  const uint64_t pos = 256 * sizeof(int64_t);
  EXPECT_GE(f32.page_bytes(), 2 * 256 * 256 + pos);
  EXPECT_LT(f32.page_bytes(), 2 * 256 * 256 + pos + 8192);
  EXPECT_GE(f16.page_bytes(), 2 * 256 * 128 + pos);
  EXPECT_LT(f16.page_bytes(), 2 * 256 * 128 + pos + 8192);
  EXPECT_GE(q8.page_bytes(), 2 * 256 * 68 + pos);
  EXPECT_LT(q8.page_bytes(), 2 * 256 * 68 + pos + 8192);
  // q8_0 needs whole blocks; types outside the four are refused.
  EXPECT_THROW(PagePool(24, 16, DType::Q8_0, DType::F16), Error);
  EXPECT_THROW(PagedKvCache(shape(1, 1, 24, 1, DType::F16, DType::Q8_0), 8), Error);
  EXPECT_THROW(kv_type_from_name("q4_0", "--cache-type-k"), Error);
  EXPECT_EQ(kv_type_from_name("bf16", "--cache-type-v"), DType::BF16);
}

TEST(KvCacheTypes, StoredRowsDecodeToTheRoundedValues) {
  std::mt19937 rng(5);
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
    PagePool pool(64, 8, t, t);
    HeadCache head;
    std::vector<std::vector<float>> rows;
    for (int i = 0; i < 19; ++i) {
      rows.push_back(random_floats(rng, 64));
      head.append(rows.back().data(), rows.back().data(), i, pool);
    }
    head.retain(std::vector<int32_t>{0, 3, 4, 5, 9, 17, 18}, pool);
    std::vector<float> buffer(64), vbuffer(64), want(64);
    std::vector<uint8_t> stored(row_bytes(t, 64));
    int j = 0;
    for (int i : {0, 3, 4, 5, 9, 17, 18}) {
      convert_from_f32(rows[size_t(i)].data(), t, stored.data(), 64);
      convert_to_f32(t, stored.data(), want.data(), 64);
      const float* k = head.key_f32(j, buffer.data());
      const float* v = head.value_f32(j, vbuffer.data());
      for (int c = 0; c < 64; ++c) {
        ASSERT_EQ(k[c], want[size_t(c)]) << dtype_name(t) << " row " << i;
        ASSERT_EQ(v[c], want[size_t(c)]) << dtype_name(t) << " row " << i;
      }
      if (t == DType::F32) {
        EXPECT_EQ(k, reinterpret_cast<const float*>(head.key_data(j)));
      }  // no copy
      ++j;
    }
    head.clear(pool);
  }
}

// Attention over f16/bf16/q8_0 pages against the f64 reference over the unrounded f32 rows: the
// error is the storage rounding's. Bounds (outputs are convex mixes of N(0,1) values, d = 64,
// scores q.k/8 of spread ~1): f16 2e-3, bf16 2e-2, q8_0 2e-2; f32 stays at the 2e-5 of the kernels.
TEST(KvCacheTypes, AttentionErrorAgainstUnroundedRowsIsBounded) {
  struct Case {
    DType type;
    double bound;
  };
  for (const Case& c :
       {Case{DType::F32, 2e-5}, Case{DType::F16, 2e-3}, Case{DType::BF16, 2e-2}, Case{DType::Q8_0, 2e-2}}) {
    const int hd = 64, kv_heads = 1, group = 2;
    PagedKvCache cache(shape(kv_heads, group, hd, 1, c.type, c.type), 300, 32);
    NaiveHead exact;
    std::mt19937 rng(21);
    ThreadPool pool(2);
    double worst = 0;
    for (int n : {120, 1, 1}) {
      const auto k = random_floats(rng, size_t(n) * hd), v = random_floats(rng, size_t(n) * hd);
      std::vector<int64_t> pos(static_cast<size_t>(n));
      for (int t = 0; t < n; ++t) pos[size_t(t)] = int64_t(exact.size()) + t;
      cache.append(0, k.data(), v.data(), n, pos.data());
      for (int t = 0; t < n; ++t) exact.append(&k[size_t(t) * hd], &v[size_t(t) * hd], pos[size_t(t)], hd);
      const auto q = random_floats(rng, size_t(n) * group * hd);
      std::vector<float> out(q.size());
      cache.attend(0, q.data(), n, out.data(), pool);
      for (int i = 0; i < n; ++i)
        for (int g = 0; g < group; ++g) {
          const auto want =
              reference(exact, &q[(size_t(i) * group + g) * hd], hd, first_n(int64_t(exact.size()) - n + i + 1));
          for (int d = 0; d < hd; ++d)
            worst = std::max(worst, std::abs(out[(size_t(i) * group + g) * hd + d] - want.out[size_t(d)]));
        }
    }
    EXPECT_LT(worst, c.bound) << dtype_name(c.type);
    if (c.type != DType::F32) {
      EXPECT_GT(worst, 1e-6) << dtype_name(c.type) << ": the rounding should show";
    }
  }
}

}  // namespace
}  // namespace kvslim
