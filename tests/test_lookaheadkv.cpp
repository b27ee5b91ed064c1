// LookaheadKV inference: the adapter's LoRA touches the lookahead rows only (prompt KV and the
// prompt's last logits stay bit-identical to the base model), run_rows with LoRA equals the
// plain forward of a model whose weights have the LoRA merged in, the press's scores equal a
// plain reduction of the lookahead rows' attention, and the adapter file is checked (base
// fingerprint, tensors, shapes, types, values).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <tuple>

#include "engine/session.h"
#include "model/lookahead_adapter.h"
#include "model/fingerprint.h"
#include "model/forward.h"
#include "model/model.h"
#include "press/registry.h"
#include "test_lookahead_adapter.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim {
namespace {

using testing::random_adapter;
using testing::random_adapter_path;

std::string tiny_model_path(uint64_t seed = 7, Arch arch = Arch::Llama) {
  testing::TinyModel m;
  m.layers = 2;
  m.heads = 4;
  m.kv_heads = 2;
  m.arch = arch;
  m.seed = seed;
  return testing::make_model(m);
}

std::vector<int32_t> prompt_tokens(int n, int n_vocab) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = 3 + (i * 37 + 11) % (n_vocab - 3);
  return t;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// ---- LoRA on rows ----

TEST(LoraAdapter, ApplyAddsTheScaledLowRankProduct) {
  testing::TinyModel tm;
  const auto model = Model::load(testing::make_model(tm));
  LoraAdapter lora(model->config(), 3, 6.0f);  // scale 2
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& p : lora.params()) p = u(rng);
  ThreadPool pool(2);
  for (LoraSite site : kAllLoraSites) {
    const int in = lora.in(site), out = lora.out(site), n = 5;
    std::vector<float> x(size_t(n) * in), y(size_t(n) * out);
    for (float& v : x) v = u(rng);
    for (float& v : y) v = u(rng);
    const std::vector<float> y0 = y;
    lora.apply(1, site, x.data(), n, y.data(), pool);
    const float* a = lora.a(1, site);
    const float* b = lora.b(1, site);
    for (int t = 0; t < n; ++t)
      for (int o = 0; o < out; ++o) {
        double want = y0[size_t(t) * out + o];
        for (int r = 0; r < 3; ++r) {
          double ax = 0;
          for (int i = 0; i < in; ++i) ax += double(a[r * in + i]) * x[size_t(t) * in + i];
          want += 2.0 * b[o * 3 + r] * ax;
        }
        ASSERT_NEAR(y[size_t(t) * out + o], want, 1e-4) << lora_site_name(site) << " row " << t << " out " << o;
      }
  }
}

// A copy of an f32 model whose seven projections per layer are W + scale * B A.
std::string merged_model(const std::string& base_path, const LoraAdapter& lora) {
  const std::string out = testing::temp_path("merged-lora.gguf");
  const gguf::File base = gguf::File::open(base_path);
  gguf::Writer w;
  for (const auto& entry : base.metadata()) w.set(entry.key, entry.value);
  for (const auto& t : base.tensors()) {
    const uint8_t* data = base.tensor_data(t);
    std::vector<uint8_t> bytes(data, data + t.n_bytes);
    for (int l = 0; l < lora.n_layers(); ++l)
      for (LoraSite site : kAllLoraSites) {
        if (t.name != fmt::format("blk.{}.{}.weight", l, lora_site_name(site))) continue;
        EXPECT_EQ(t.type, uint32_t(gguf::TensorType::F32));
        auto* wts = reinterpret_cast<float*>(bytes.data());
        const int in = lora.in(site), out_dim = lora.out(site), r = lora.rank();
        for (int o = 0; o < out_dim; ++o)
          for (int i = 0; i < in; ++i) {
            double delta = 0;
            for (int k = 0; k < r; ++k) delta += double(lora.b(l, site)[o * r + k]) * lora.a(l, site)[k * in + i];
            wts[size_t(o) * in + i] += float(lora.scale() * delta);
          }
      }
    w.add_tensor(t.name, t.type, t.dims, std::move(bytes));
  }
  w.write(out);
  return out;
}

void expect_near_rel(const float* got, const float* want, int64_t n, double tol, const std::string& what) {
  double max_abs = 0, max_err = 0;
  for (int64_t i = 0; i < n; ++i) {
    max_abs = std::max(max_abs, std::abs(double(want[i])));
    max_err = std::max(max_err, std::abs(double(got[i]) - want[i]));
  }
  EXPECT_LE(max_err, tol * std::max(1.0, max_abs)) << what;
}

TEST(LookaheadRows, LoraOnRowsEqualsTheMergedModel) {
  for (Arch arch : {Arch::Llama, Arch::Qwen2, Arch::Qwen3}) {
    const std::string base_path = tiny_model_path(7, arch);
    const auto base = Model::load(base_path);
    const LookaheadAdapter adapter = random_adapter(*base, {6, 4, 16});
    const auto merged = Model::load(merged_model(base_path, adapter.lora));
    const ModelConfig& c = base->config();
    ThreadPool pool(2);
    const std::vector<int32_t> prompt = prompt_tokens(20, c.n_vocab);
    const int m = adapter.n_lookahead;

    // Both caches hold the base model's prompt KV; the rows then run with the LoRA on the base
    // model, and without it on the merged model.
    PagedKvCache with_lora(kv_shape(c), 64), on_merged(kv_shape(c), 64);
    Forward base_fwd(*base, 32), merged_fwd(*merged, 32);
    base_fwd.run(prompt.data(), int(prompt.size()), 0, with_lora, pool);
    base_fwd.run(prompt.data(), int(prompt.size()), 0, on_merged, pool);
    const float* got = base_fwd.run_rows(adapter.embd.data(), m, 20, with_lora, pool, &adapter.lora, true);
    const float* want = merged_fwd.run_rows(adapter.embd.data(), m, 20, on_merged, pool, nullptr, true);
    expect_near_rel(got, want, int64_t(m) * c.n_vocab, 1e-4, std::string("logits ") + arch_name(arch));
    for (int l = 0; l < c.n_layers; ++l)
      for (int h = 0; h < c.n_kv_heads; ++h)
        for (int64_t i = 20; i < 20 + m; ++i) {
          const HeadCache& a = with_lora.head(l, h);
          const HeadCache& b = on_merged.head(l, h);
          expect_near_rel(a.key_f32(i, nullptr), b.key_f32(i, nullptr), c.head_dim, 1e-4, "key");  // f32 pages
          expect_near_rel(a.value_f32(i, nullptr), b.value_f32(i, nullptr), c.head_dim, 1e-4, "value");
        }
    // The LoRA matters: without it the rows come out otherwise.
    PagedKvCache plain(kv_shape(c), 64);
    base_fwd.run(prompt.data(), int(prompt.size()), 0, plain, pool);
    const float* without = base_fwd.run_rows(adapter.embd.data(), m, 20, plain, pool, nullptr, true);
    double diff = 0;
    for (int64_t i = 0; i < int64_t(m) * c.n_vocab; ++i) diff = std::max(diff, std::abs(double(without[i]) - want[i]));
    EXPECT_GT(diff, 1e-2);
  }
}

// ---- the press in a session ----

struct Prefilled {
  std::vector<float> logits;                                  // the prompt's last
  std::vector<std::vector<std::vector<float>>> keys, values;  // [layer * kv_heads + head][token]
  std::vector<std::vector<int64_t>> positions;
  std::vector<std::vector<float>> scores;
};

Prefilled prefill(const Model& model, const std::vector<int32_t>& prompt, const std::string& method,
                  const std::vector<std::string>& options, int64_t budget) {
  ThreadPool pool(2);
  EngineOptions engine;
  engine.batch = 16;
  engine.page_tokens = 8;
  engine.cache_type_k = engine.cache_type_v = DType::F32;  // compared bit for bit with an f32 reference
  const auto press = make_press(method, options);
  Session session(model, pool,
                  {.engine = engine,
                   .capacity = int64_t(prompt.size()) + 4,
                   .press = press.get(),
                   .budget = budget,
                   .n_predict = 4,
                   .seed = 1});
  session.record_scores();
  Prefilled r;
  const float* logits = session.prefill(prompt);
  r.logits.assign(logits, logits + model.config().n_vocab);
  const PagedKvCache& kv = session.kv();
  for (int l = 0; l < kv.n_layers(); ++l)
    for (int h = 0; h < kv.n_kv_heads(); ++h) {
      const HeadCache& head = kv.head(l, h);
      r.keys.emplace_back();
      r.values.emplace_back();
      r.positions.emplace_back();
      for (int64_t i = 0; i < head.size(); ++i) {
        const float* k = head.key_f32(i, nullptr);  // f32 pages: in place
        const float* v = head.value_f32(i, nullptr);
        r.keys.back().emplace_back(k, k + kv.head_dim());
        r.values.back().emplace_back(v, v + kv.head_dim());
        r.positions.back().push_back(head.position(i));
      }
      r.scores.push_back(session.recorded_scores(l, h));
    }
  return r;
}

TEST(LookaheadKvPress, PromptKvAndLastLogitsAreBitIdenticalToTheBaseModel) {
  const auto model = Model::load(tiny_model_path());
  const auto prompt = prompt_tokens(150, model->config().n_vocab);
  const std::string adapter = random_adapter_path(*model);
  const Prefilled full = prefill(*model, prompt, "full", {}, kNoBudget);
  const Prefilled r = prefill(*model, prompt, "lookaheadkv", {"adapter=" + adapter}, 40);
  EXPECT_EQ(r.logits, full.logits);
  for (size_t head = 0; head < r.positions.size(); ++head) {
    ASSERT_EQ(r.positions[head].size(), 40u);
    for (size_t i = 0; i < r.positions[head].size(); ++i) {
      const int64_t p = r.positions[head][i];
      ASSERT_LT(p, 150) << "a lookahead row's KV stayed";
      EXPECT_EQ(r.keys[head][i], full.keys[head][p]) << "position " << p;
      EXPECT_EQ(r.values[head][i], full.values[head][p]) << "position " << p;
    }
  }
}

TEST(LookaheadKvPress, BudgetCoveringThePromptIsANoOp) {
  const auto model = Model::load(tiny_model_path());
  const auto prompt = prompt_tokens(60, model->config().n_vocab);
  const Prefilled full = prefill(*model, prompt, "full", {}, kNoBudget);
  const Prefilled r = prefill(*model, prompt, "lookaheadkv", {"adapter=" + random_adapter_path(*model)}, 60);
  EXPECT_EQ(r.logits, full.logits);
  EXPECT_EQ(r.positions, full.positions);
  EXPECT_EQ(r.keys, full.keys);
  EXPECT_EQ(r.values, full.values);
}

// Keeps every attention row of the queries at or after a position.
struct RowRecorder final : AttentionProbe {
  explicit RowRecorder(int64_t from) : from(from) {}
  void on_row(int layer, int q_head, int64_t position, const float* probs, int64_t n_visible) override {
    if (position < from) return;
    std::lock_guard<std::mutex> lock(mutex);
    rows[{layer, q_head, position}] = std::vector<float>(probs, probs + n_visible);
  }
  int64_t from;
  std::mutex mutex;
  std::map<std::tuple<int, int, int64_t>, std::vector<float>> rows;
};

TEST(LookaheadKvPress, ScoresArePooledMeanAttentionOfTheLookaheadRows) {
  const auto model = Model::load(tiny_model_path());
  const ModelConfig& c = model->config();
  const int n = 90, budget = 30;
  const auto prompt = prompt_tokens(n, c.n_vocab);
  const AdapterShape shape{12, 4, 32};
  const std::string path = random_adapter_path(*model, shape);
  const LookaheadAdapter adapter = LookaheadAdapter::load(path, c, model_fingerprint(*model));
  const Prefilled r = prefill(*model, prompt, "lookaheadkv", {"adapter=" + path}, budget);

  // Reference: the rows' attention as the cache reports it, reduced by plain loops.
  ThreadPool pool(1);
  PagedKvCache cache(kv_shape(c), n + shape.n_lookahead);
  Forward forward(*model, 128);
  forward.run(prompt.data(), n, 0, cache, pool);
  RowRecorder recorder(n);
  cache.set_probe(&recorder);
  forward.run_rows(adapter.embd.data(), shape.n_lookahead, n, cache, pool, &adapter.lora);
  const int group = c.group_size();
  for (int l = 0; l < c.n_layers; ++l)
    for (int h = 0; h < c.n_kv_heads; ++h) {
      std::vector<double> mean(n, 0.0);
      for (int g = 0; g < group; ++g)
        for (int i = 0; i < shape.n_lookahead; ++i) {
          const std::vector<float>& row = recorder.rows.at({l, h * group + g, n + i});
          ASSERT_EQ(int64_t(row.size()), n + i + 1);  // the prompt and the rows up to itself
          for (int j = 0; j < n; ++j) mean[j] += row[j] / double(group * shape.n_lookahead);
        }
      std::vector<double> pooled(n);
      for (int j = 0; j < n; ++j) {
        pooled[j] = 0;  // probabilities are >= 0, so 0 is a neutral start for the max
        for (int k = std::max(0, j - 3); k <= std::min(n - 1, j + 3); ++k) pooled[j] = std::max(pooled[j], mean[k]);
      }
      const std::vector<float>& got = r.scores[size_t(l) * c.n_kv_heads + h];
      ASSERT_EQ(int(got.size()), n);
      for (int j = 0; j < n; ++j) EXPECT_NEAR(got[j], pooled[j], 1e-6) << "layer " << l << " head " << h << " j " << j;
      // Kept: the top `budget` of the reference scores (ties: lower position).
      std::vector<int64_t> order(n);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return pooled[a] > pooled[b]; });
      order.resize(budget);
      std::sort(order.begin(), order.end());
      EXPECT_EQ(r.positions[size_t(l) * c.n_kv_heads + h], order) << "layer " << l << " head " << h;
    }
}

TEST(LookaheadKvPress, AdapterOptionIsRequired) {
  EXPECT_NE(message_of([] { make_press("lookaheadkv", {}); }).find("adapter=FILE is required"), std::string::npos);
  EXPECT_THROW(make_press("lookaheadkv", {"adapter=x.gguf", "kernel=4"}), Error);
}

TEST(LookaheadKvPress, AdapterOfAnotherModelIsRefused) {
  const auto model = Model::load(tiny_model_path(7));
  const auto other = Model::load(tiny_model_path(8));
  const std::string path = random_adapter_path(*model);
  const std::string msg =
      message_of([&] { prefill(*other, prompt_tokens(50, 256), "lookaheadkv", {"adapter=" + path}, 20); });
  EXPECT_NE(msg.find(fmt::format("{:016x}", model_fingerprint(*model))), std::string::npos) << msg;
  EXPECT_NE(msg.find(fmt::format("{:016x}", model_fingerprint(*other))), std::string::npos) << msg;
  // Refused even when the budget would make the press a no-op.
  EXPECT_THROW(prefill(*other, prompt_tokens(50, 256), "lookaheadkv", {"adapter=" + path}, 100), Error);
}

// ---- the adapter file ----

TEST(LookaheadAdapterFile, SavesAndLoadsEveryValue) {
  const auto model = Model::load(tiny_model_path());
  const LookaheadAdapter a = random_adapter(*model, {5, 3, 12});
  const std::string path = testing::temp_path("adapter-roundtrip.gguf");
  a.save(path);
  const LookaheadAdapter b = LookaheadAdapter::load(path, model->config(), model_fingerprint(*model));
  EXPECT_EQ(b.n_lookahead, 5);
  EXPECT_EQ(b.lora.rank(), 3);
  EXPECT_EQ(b.lora.alpha(), 12.0f);
  EXPECT_EQ(b.base_fingerprint, a.base_fingerprint);
  EXPECT_EQ(b.embd, a.embd);
  EXPECT_TRUE(
      std::equal(a.lora.params().begin(), a.lora.params().end(), b.lora.params().begin(), b.lora.params().end()));
}

TEST(LookaheadAdapterFile, InitialAdapterStartsAsTheBaseModel) {
  const auto model = Model::load(tiny_model_path());
  const ModelConfig& c = model->config();
  const LookaheadAdapter a = LookaheadAdapter::initial(*model, {64, 8, 32}, 9);
  EXPECT_EQ(a.base_fingerprint, model_fingerprint(*model));
  // B = 0: the LoRA adds nothing until trained; A is Kaiming-uniform, not zero.
  for (int l = 0; l < c.n_layers; ++l)
    for (LoraSite site : kAllLoraSites) {
      const float bound = 1.0f / std::sqrt(float(a.lora.in(site)));
      double sum_sq = 0;
      for (int64_t i = 0; i < int64_t(8) * a.lora.in(site); ++i) {
        const float v = a.lora.a(l, site)[i];
        EXPECT_LE(std::abs(v), bound);
        sum_sq += double(v) * v;
      }
      EXPECT_GT(sum_sq, 0.0);
      for (int64_t i = 0; i < int64_t(8) * a.lora.out(site); ++i) ASSERT_EQ(a.lora.b(l, site)[i], 0.0f);
    }
  // Embeddings: per dimension, the rows' mean is near the token embeddings' mean and their
  // spread near the tokens' spread (64 rows: the sample mean's error is about sigma / 8).
  std::vector<float> row(c.dim);
  double mean_err = 0, spread_ratio = 0;
  for (int d = 0; d < c.dim; ++d) {
    double s = 0, ss = 0;
    for (int t = 0; t < c.n_vocab; ++t) {
      convert_to_f32(model->token_embedding().type, model->token_embedding().row(t), row.data(), c.dim);
      s += row[d];
      ss += double(row[d]) * row[d];
    }
    const double mu = s / c.n_vocab, sigma = std::sqrt(ss / c.n_vocab - mu * mu);
    double rs = 0, rss = 0;
    for (int i = 0; i < 64; ++i) {
      const double v = a.embd[size_t(i) * c.dim + d];
      rs += v;
      rss += v * v;
    }
    const double rmu = rs / 64, rsigma = std::sqrt(rss / 64 - rmu * rmu);
    mean_err += std::abs(rmu - mu) / sigma / c.dim;
    spread_ratio += rsigma / sigma / c.dim;
  }
  EXPECT_LT(mean_err, 0.25);
  EXPECT_NEAR(spread_ratio, 1.0, 0.15);
}

// Rewrites an adapter file, letting `edit` change, drop (return false) or add tensors.
struct TensorEdit {
  std::string name;
  uint32_t type;
  std::vector<uint64_t> dims;
  std::vector<uint8_t> bytes;
};
std::string rewritten(const std::string& src, const std::string& name, const std::function<bool(TensorEdit&)>& edit,
                      const std::vector<gguf::MetadataEntry>& extra_metadata = {}, bool add_tensor = false) {
  const gguf::File f = gguf::File::open(src);
  gguf::Writer w;
  for (const auto& e : f.metadata()) w.set(e.key, e.value);
  for (const auto& e : extra_metadata) w.set(e.key, e.value);
  for (const auto& t : f.tensors()) {
    const uint8_t* data = f.tensor_data(t);
    TensorEdit te{t.name, t.type, t.dims, std::vector<uint8_t>(data, data + t.n_bytes)};
    if (!edit(te)) continue;
    w.add_tensor(te.name, te.type, te.dims, std::move(te.bytes));
  }
  if (add_tensor) w.add_tensor("extra.weight", uint32_t(gguf::TensorType::F32), {1}, std::vector<uint8_t>(4, 0));
  const std::string out = testing::temp_path(name);
  w.write(out);
  return out;
}

TEST(LookaheadAdapterFile, CorruptFilesAreRefusedNamingTheFault) {
  const auto model = Model::load(tiny_model_path());
  const ModelConfig& c = model->config();
  const uint64_t fp = model_fingerprint(*model);
  const std::string good = random_adapter_path(*model, {4, 2, 8});
  auto load_error = [&](const std::string& path) { return message_of([&] { LookaheadAdapter::load(path, c, fp); }); };
  auto expect_error = [&](const std::string& path, const std::string& needle) {
    const std::string msg = load_error(path);
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  };
  EXPECT_EQ(load_error(good), "(no error)");
  expect_error(rewritten(good, "a-missing.gguf", [](TensorEdit& t) { return t.name != "blk.1.ffn_up.lora_b"; }),
               "missing tensor 'blk.1.ffn_up.lora_b'");
  expect_error(rewritten(good, "a-shape.gguf",
                         [](TensorEdit& t) {
                           if (t.name == "blk.0.attn_k.lora_a") std::swap(t.dims[0], t.dims[1]);
                           return true;
                         }),
               "tensor 'blk.0.attn_k.lora_a' has shape");
  expect_error(rewritten(good, "a-type.gguf",
                         [](TensorEdit& t) {
                           if (t.name != "lookahead.embd") return true;
                           t.type = uint32_t(gguf::TensorType::F16);
                           t.bytes.resize(t.bytes.size() / 2);
                           return true;
                         }),
               "tensor 'lookahead.embd' has type f16, expected f32");
  expect_error(rewritten(good, "a-nan.gguf",
                         [](TensorEdit& t) {
                           if (t.name == "blk.0.attn_output.lora_b") {
                             const float nan = std::nanf("");
                             std::memcpy(t.bytes.data() + 8, &nan, 4);
                           }
                           return true;
                         }),
               "tensor 'blk.0.attn_output.lora_b' holds a non-finite value at element 2");
  expect_error(rewritten(
                   good, "a-extra.gguf", [](TensorEdit&) { return true; }, {}, true),
               "tensors, expected");
  expect_error(rewritten(good, "a-arch.gguf", [](TensorEdit&) { return true; },
                         {{"general.architecture", gguf::Value::of_string("llama")}}),
               "not a LookaheadKV adapter");
  expect_error(rewritten(good, "a-rank.gguf", [](TensorEdit&) { return true; },
                         {{"lookahead.lora_rank", gguf::Value::of_u32(0)}}),
               "lookahead.lora_rank 0 is outside [1, 4096]");
  expect_error(
      rewritten(good, "a-count.gguf", [](TensorEdit&) { return true; }, {{"lookahead.count", gguf::Value::of_u32(5)}}),
      "tensor 'lookahead.embd' has shape");
  expect_error(testing::temp_path("no-such-adapter.gguf"), "cannot open");
  expect_error(tiny_model_path(), "not a LookaheadKV adapter");
}

}  // namespace
}  // namespace kvslim
