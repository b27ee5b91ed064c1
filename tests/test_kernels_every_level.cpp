// Every public kernel at every instruction-set level this CPU runs, against the scalar level's
// result on the same inputs (the scalar level is itself held to naive references by test_ops,
// test_quant_dot, test_matmul_int8, test_kv_cache and test_forward). Float kernels may sum in
// another order: they agree to a small multiple of f32 rounding of the sum of |terms|; exact
// operations (conversions, dequantisation, activation quantisation, the threshold scan) agree bit
// for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kv/attention.h"
#include "kv/head_cache.h"
#include "kv/page_pool.h"
#include "tensor/dtype.h"
#include "tensor/isa.h"
#include "tensor/kernels.h"
#include "tensor/ops.h"
#include "util/thread_pool.h"
#include "random_values.h"

namespace kvslim {
namespace {

using test::normal_vec;

// The levels to compare with scalar (all supported ones but scalar itself).
std::vector<Isa> higher_levels() {
  std::vector<Isa> out;
  for (Isa isa : supported_isas()) {
    if (isa != Isa::Scalar) out.push_back(isa);
  }
  return out;
}

// |got - want| <= tol * scale[i] for each i, with a message naming the level and index.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::vector<float>& scale,
                  double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - double(want[i]));
    if (!(err <= tol * scale[i]) && reported++ < 5) {
      ADD_FAILURE() << what << " [" << i << "]: " << got[i] << " vs scalar " << want[i] << " (allowed "
                    << tol * scale[i] << ")";
    }
  }
}

struct Weights {
  DType type;
  int64_t rows, cols;
  std::vector<uint8_t> data;
  std::vector<float> f32;  // the dequantised values, for the error scale
  WeightView view() const { return {type, data.data(), rows, cols}; }
};

Weights make_weights(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  ScopedIsa scalar(Isa::Scalar);
  Weights w{type, rows, cols, {}, {}};
  const auto src = normal_vec(size_t(rows * cols), seed, 0.05f);
  w.data.resize(row_bytes(type, cols) * size_t(rows));
  w.f32.resize(src.size());
  for (int64_t r = 0; r < rows; ++r) {
    convert_from_f32(src.data() + r * cols, type, w.data.data() + r * row_bytes(type, cols), cols);
    convert_to_f32(type, w.data.data() + r * row_bytes(type, cols), w.f32.data() + r * cols, cols);
  }
  return w;
}

// sum_c |W[r][c] x[c]| for each token t and row r: the size the products' rounding scales with.
std::vector<float> abs_products(const Weights& w, const std::vector<float>& x, int64_t n) {
  std::vector<float> out(size_t(n * w.rows));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t r = 0; r < w.rows; ++r) {
      double s = 0;
      for (int64_t c = 0; c < w.cols; ++c) s += std::fabs(double(w.f32[r * w.cols + c]) * x[t * w.cols + c]);
      out[size_t(t * w.rows + r)] = float(s);
    }
  }
  return out;
}

// How far a level's product may be from scalar's, relative to sum |w x|: f32 rounding for the
// float types; for bf16 weights on AVX512-BF16 (x rounded to bf16) and the block types (x
// quantised to 8 bits, in blocks of 32 for the int8 GEMMs and q8_K for the f32 path of K-quants)
// the activations' rounding, which differs between paths by up to half a step of amax / 127.
double product_tolerance(DType type, Isa isa) {
  if (type == DType::F32 || type == DType::F16) return 2e-6;
  if (type == DType::BF16) {
    ScopedIsa level(isa);
    return bf16_weights_round_x() ? 1e-2 : 2e-6;
  }
  return 1e-2;
}

class EveryLevelWeights : public ::testing::TestWithParam<DType> {};

TEST_P(EveryLevelWeights, MatvecAgreesWithScalar) {
  const DType type = GetParam();
  const int64_t cols = dtype_block_size(type) == 256 ? 768 : 160;
  const Weights w = make_weights(type, 37, cols, 11);
  const auto x = normal_vec(size_t(cols), 12);
  const auto scale = abs_products(w, x, 1);
  ThreadPool pool(2);
  std::vector<float> want(size_t(w.rows));
  {
    ScopedIsa scalar(Isa::Scalar);
    matvec(w.view(), x.data(), want.data(), pool);
  }
  for (Isa isa : higher_levels()) {
    ScopedIsa level(isa);
    std::vector<float> got(size_t(w.rows));
    matvec(w.view(), x.data(), got.data(), pool);
    // decode quantises x the same way on every path (q8_0 blocks / q8_K): only f32 sums differ
    const double tol = type == DType::BF16 && bf16_weights_round_x() ? 1e-2 : 2e-6;
    expect_close(got, want, scale, tol, std::string("matvec ") + dtype_name(type) + " at " + isa_name(isa));
  }
}

TEST_P(EveryLevelWeights, MatmulAgreesWithScalarOnOddShapes) {
  const DType type = GetParam();
  // Float types: two K slices of the GEMM (256 + 44), the last with a tail of 4 columns that the
  // AVX2 panel packing (8 columns at a time) does one by one.
  const int64_t block = dtype_block_size(type);
  const int64_t cols = block == 256 ? 512 : block == 1 ? 300 : 96;
  const Weights w = make_weights(type, 45, cols, 21);
  ThreadPool pool(2);
  for (int64_t n : {int64_t{7}, int64_t{23}}) {
    const auto x = normal_vec(size_t(n * cols), 22 + uint32_t(n));
    const auto scale = abs_products(w, x, n);
    std::vector<float> want(size_t(n * w.rows));
    {
      ScopedIsa scalar(Isa::Scalar);
      matmul(w.view(), x.data(), n, want.data(), pool);
    }
    for (Isa isa : higher_levels()) {
      std::vector<float> got(size_t(n * w.rows));
      {
        ScopedIsa level(isa);
        matmul(w.view(), x.data(), n, got.data(), pool);
      }
      expect_close(got, want, scale, product_tolerance(type, isa),
                   std::string("matmul ") + dtype_name(type) + " n=" + std::to_string(n) + " at " + isa_name(isa));
    }
  }
}

// Prefill's q/k/v and gate/up products (matmul_multi, one packing of x and one queue of weight
// panels where the weights share a type): each output equals matmul's bit for bit at every level
// and thread count, with row counts that end mid-panel; so do mixed types, one product each.
TEST_P(EveryLevelWeights, MatmulMultiEqualsSeparateMatmuls) {
  const DType type = GetParam();
  const int64_t block = dtype_block_size(type);
  const int64_t cols = block == 256 ? 512 : block == 1 ? 300 : 96;
  const Weights a = make_weights(type, 301, cols, 31), b = make_weights(type, 40, cols, 32),
                c = make_weights(type, 97, cols, 33);
  const Weights other = make_weights(type == DType::F32 ? DType::F16 : DType::F32, 19, cols, 34);
  const int64_t n = 37;
  const auto x = normal_vec(size_t(n * cols), 35);
  ThreadPool one(1), two(2), three(3);
  std::vector<Isa> levels = higher_levels();
  levels.insert(levels.begin(), Isa::Scalar);
  for (Isa isa : levels) {
    ScopedIsa level(isa);
    for (const std::vector<const Weights*>& group :
         {std::vector<const Weights*>{&a, &b, &c}, std::vector<const Weights*>{&b, &other, &a}}) {
      std::vector<WeightView> views;
      std::vector<std::vector<float>> want;
      for (const Weights* w : group) {
        views.push_back(w->view());
        want.emplace_back(size_t(n * w->rows));
        matmul(w->view(), x.data(), n, want.back().data(), one);
      }
      for (ThreadPool* pool : {&one, &two, &three}) {
        std::vector<std::vector<float>> got;
        std::vector<float*> ys;
        for (const Weights* w : group) got.emplace_back(size_t(n * w->rows), -1.0f);
        for (auto& g : got) ys.push_back(g.data());
        matmul_multi(views, x.data(), n, ys, *pool);
        for (size_t i = 0; i < group.size(); ++i)
          ASSERT_EQ(0, std::memcmp(want[i].data(), got[i].data(), want[i].size() * sizeof(float)))
              << dtype_name(group[i]->type) << " product " << i << " of " << group.size() << " at " << isa_name(isa)
              << " on " << pool->size() << " threads";
      }
    }
  }
}

TEST_P(EveryLevelWeights, ConversionsAreBitIdentical) {
  const DType type = GetParam();
  const int64_t n = dtype_block_size(type) == 256 ? 512 : 96;
  const auto src = normal_vec(size_t(n), 31);
  std::vector<uint8_t> want_q(row_bytes(type, n)), got_q(row_bytes(type, n));
  std::vector<float> want_f(static_cast<size_t>(n)), got_f(static_cast<size_t>(n));
  {
    ScopedIsa scalar(Isa::Scalar);
    convert_from_f32(src.data(), type, want_q.data(), n);
    convert_to_f32(type, want_q.data(), want_f.data(), n);
  }
  for (Isa isa : higher_levels()) {
    ScopedIsa level(isa);
    convert_from_f32(src.data(), type, got_q.data(), n);
    convert_to_f32(type, want_q.data(), got_f.data(), n);
    EXPECT_EQ(got_q, want_q) << dtype_name(type) << " at " << isa_name(isa);
    EXPECT_EQ(std::memcmp(got_f.data(), want_f.data(), got_f.size() * 4), 0)
        << dtype_name(type) << " at " << isa_name(isa);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, EveryLevelWeights, ::testing::ValuesIn(kAllDTypes),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

TEST(EveryLevel, ActivationQuantisationIsBitIdentical) {
  const int64_t n = 256;
  const auto x = normal_vec(size_t(n), 41);
  std::vector<uint8_t> want(detail::q8_activation_bytes(n) + 64), got(want.size());
  std::vector<float> want_r(static_cast<size_t>(n)), got_r(static_cast<size_t>(n));
  auto aligned = [](std::vector<uint8_t>& v) {
    return v.data() + (64 - reinterpret_cast<uintptr_t>(v.data()) % 64) % 64;
  };
  detail::Q8Activations a, b;
  {
    ScopedIsa scalar(Isa::Scalar);
    a = detail::quantize_activations(x.data(), n, aligned(want));
    detail::round_through_q8_activations(x.data(), n, want_r.data());
  }
  for (Isa isa : higher_levels()) {
    ScopedIsa level(isa);
    b = detail::quantize_activations(x.data(), n, aligned(got));
    detail::round_through_q8_activations(x.data(), n, got_r.data());
    EXPECT_EQ(std::memcmp(a.q, b.q, size_t(n)), 0) << isa_name(isa);
    EXPECT_EQ(std::memcmp(a.scale, b.scale, size_t(n / 32) * 4), 0) << isa_name(isa);
    EXPECT_EQ(std::memcmp(a.lane_corr, b.lane_corr, size_t(n / 4) * 4), 0) << isa_name(isa);
    EXPECT_EQ(std::memcmp(want_r.data(), got_r.data(), size_t(n) * 4), 0) << isa_name(isa);
  }
}

TEST(EveryLevel, ElementwiseKernelsAgreeWithScalar) {
  const int64_t n = 203;  // not a multiple of any vector width
  const auto a = normal_vec(size_t(n), 51), b = normal_vec(size_t(n), 52), w = normal_vec(size_t(n), 53);
  struct Out {
    std::vector<float> norm, soft, peak, glu, add, axpy, rope;
    float dot = 0;
    std::vector<int32_t> above;
  };
  auto compute = [&] {
    Out o;
    o.norm.resize(size_t(n));
    rmsnorm(a.data(), w.data(), o.norm.data(), n, 1e-5f);
    o.soft = a;
    softmax_inplace(o.soft.data(), n);
    // One logit 100 above the rest, inside the vector loops at every width: a maximum that
    // missed it would leave exp(x - max) to overflow (e^97 is beyond float).
    o.peak = a;
    o.peak[137] = 100.0f;
    softmax_inplace(o.peak.data(), n);
    o.glu.resize(size_t(n));
    swiglu(a.data(), b.data(), o.glu.data(), n);
    o.add = a;
    add_inplace(o.add.data(), b.data(), n);
    o.axpy = a;
    axpy(0.37f, b.data(), o.axpy.data(), n);
    o.dot = dot(a.data(), b.data(), n);
    o.rope.assign(a.begin(), a.begin() + 4 * 48);
    RopeConfig rc;
    rc.head_dim = 48;
    rc.n_rot = 32;
    rc.neox = true;
    rope_inplace(o.rope.data(), 4, 1234, rc);
    o.above.resize(size_t(n) + 16);
    o.above.resize(size_t(indices_at_least(a.data(), n, 0.25f, o.above.data())));
    return o;
  };
  Out want;
  {
    ScopedIsa scalar(Isa::Scalar);
    want = compute();
  }
  const std::vector<float> ones(size_t(n), 1.0f);
  for (Isa isa : higher_levels()) {
    ScopedIsa level(isa);
    const Out got = compute();
    const std::string at = std::string(" at ") + isa_name(isa);
    expect_close(got.norm, want.norm, std::vector<float>(size_t(n), 4.0f), 1e-6, "rmsnorm" + at);
    expect_close(got.soft, want.soft, want.soft, 1e-6, "softmax" + at);
    expect_close(got.peak, want.peak, ones, 1e-6, "softmax with a peak" + at);
    expect_close(got.glu, want.glu, std::vector<float>(size_t(n), 4.0f), 1e-6, "swiglu" + at);
    expect_close(got.add, want.add, ones, 0.0, "add" + at);
    expect_close(got.axpy, want.axpy, std::vector<float>(size_t(n), 4.0f), 1e-6, "axpy" + at);
    EXPECT_NEAR(got.dot, want.dot, 1e-5 * n) << "dot" << at;
    expect_close(got.rope, want.rope, std::vector<float>(got.rope.size(), 4.0f), 1e-5, "rope" + at);
    EXPECT_EQ(got.above, want.above) << "indices_at_least" << at;
  }
}

// Quest's page bounds at every level (the scalar level too) against the formula written out:
// sum over channels of max(q * lo, q * hi), bit for bit, including zero and negative query
// channels, equal lo and hi (one-token pages) and page counts off every vector width.
TEST(EveryLevel, MinmaxLogitBoundsMatchTheMaxFormBitForBit) {
  const int channels = 64;
  for (int64_t n : {1, 7, 203}) {
    const int64_t stride = n + 5;
    auto lo = normal_vec(size_t(channels * stride), 81), hi = normal_vec(size_t(channels * stride), 82);
    for (size_t i = 0; i < lo.size(); ++i) {
      if (lo[i] > hi[i]) std::swap(lo[i], hi[i]);
      if (i % 11 == 0) hi[i] = lo[i];
    }
    auto q = normal_vec(size_t(channels), 83);
    q[3] = 0.0f;
    q[4] = -0.0f;
    std::vector<float> want(size_t(n), 0.0f);
    for (int c = 0; c < channels; ++c) {
      for (int64_t p = 0; p < n; ++p) want[p] += std::max(q[c] * lo[c * stride + p], q[c] * hi[c * stride + p]);
    }
    for (Isa isa : supported_isas()) {
      ScopedIsa level(isa);
      std::vector<float> got(size_t(n), -1.0f);
      minmax_logit_bounds(lo.data(), hi.data(), stride, channels, q.data(), n, got.data());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), size_t(n) * 4), 0) << n << " pages at " << isa_name(isa);
    }
  }
}

TEST(EveryLevel, GemmF32AgreesWithScalar) {
  const int64_t n = 19, k = 70, m = 37;
  const auto x = normal_vec(size_t(n * k), 61), wnt = normal_vec(size_t(m * k), 62),
             wnn = normal_vec(size_t(k * m), 63);
  auto compute = [&] {
    std::vector<float> nt(size_t(n * m), 0.5f), nn(size_t(n * m), 0.5f);
    gemm_f32_nt(x.data(), k, n, wnt.data(), m, k, nt.data(), m, true);
    gemm_f32_nn(x.data(), k, n, wnn.data(), k, m, nn.data(), m, false);
    return std::pair{nt, nn};
  };
  std::pair<std::vector<float>, std::vector<float>> want;
  {
    ScopedIsa scalar(Isa::Scalar);
    want = compute();
  }
  const std::vector<float> scale(size_t(n * m), float(4 * k));  // |x w| summed over k stays far below this
  for (Isa isa : higher_levels()) {
    ScopedIsa level(isa);
    const auto got = compute();
    expect_close(got.first, want.first, scale, 1e-6, std::string("gemm_f32_nt at ") + isa_name(isa));
    expect_close(got.second, want.second, scale, 1e-6, std::string("gemm_f32_nn at ") + isa_name(isa));
  }
}

// Attention over a paged head of every KV page type and the head sizes the fast paths specialise
// (plus one they do not): decode (one query) and prefill (a tile of queries), dense and sparse.
class EveryLevelAttention : public ::testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(EveryLevelAttention, AgreesWithScalar) {
  const auto [type, hd] = GetParam();
  const int page = 16, n_q_heads = 2;
  const int64_t tokens = 75;
  PagePool pool(hd, page, type, type);
  HeadCache head;
  const auto k = normal_vec(size_t(tokens * hd), 71), v = normal_vec(size_t(tokens * hd), 72);
  for (int64_t t = 0; t < tokens; ++t) head.append(k.data() + t * hd, v.data() + t * hd, t, pool);
  const PagedKv kv{head, hd, page};
  const int64_t n_q = 5;
  const auto q = normal_vec(size_t(n_q * n_q_heads * hd), 73, 0.3f);
  // 11 rows: the AVX2 decode kernels take rows eight at a time, then one by one.
  const std::vector<int32_t> picked = {0, 3, 5, 9, 17, 18, 30, 40, 51, 66, 74};
  struct Out {
    std::vector<float> decode, prefill, sparse, scores;
  };
  auto compute = [&] {
    Out o;
    AttentionScratch scratch;
    o.decode.resize(size_t(n_q_heads * hd));
    attend_dense(kv, q.data(), hd, n_q_heads, 1, o.decode.data(), hd, scratch);
    o.prefill.resize(size_t(n_q * n_q_heads * hd));
    attend_dense(kv, q.data(), int64_t(n_q_heads) * hd, n_q_heads, n_q, o.prefill.data(), int64_t(n_q_heads) * hd,
                 scratch);
    o.sparse.resize(size_t(n_q_heads * hd));
    attend_sparse(kv, picked, q.data(), n_q_heads, o.sparse.data(), scratch);
    o.scores.resize(size_t(n_q_heads * tokens));
    attention_scores(kv, q.data(), n_q_heads, o.scores.data(), tokens, scratch);
    return o;
  };
  Out want;
  {
    ScopedIsa scalar(Isa::Scalar);
    want = compute();
  }
  for (Isa isa : higher_levels()) {
    ScopedIsa level(isa);
    const Out got = compute();
    const std::string at = std::string(dtype_name(type)) + " hd " + std::to_string(hd) + " at " + isa_name(isa);
    // outputs are convex combinations of values of size ~1; probabilities are at most 1
    expect_close(got.decode, want.decode, std::vector<float>(got.decode.size(), 8.0f), 1e-5, "decode " + at);
    expect_close(got.prefill, want.prefill, std::vector<float>(got.prefill.size(), 8.0f), 1e-5, "prefill " + at);
    expect_close(got.sparse, want.sparse, std::vector<float>(got.sparse.size(), 8.0f), 1e-5, "sparse " + at);
    expect_close(got.scores, want.scores, std::vector<float>(got.scores.size(), 1.0f), 1e-5, "scores " + at);
  }
}

INSTANTIATE_TEST_SUITE_P(KvTypesAndHeadSizes, EveryLevelAttention,
                         ::testing::Combine(::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0),
                                            ::testing::Values(64, 128, 96)),
                         [](const ::testing::TestParamInfo<std::tuple<DType, int>>& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_hd" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace kvslim
