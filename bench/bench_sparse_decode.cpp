// Micro-benchmark of one decode step's attention in one Llama-3.2-1B-shaped layer (32 query heads
// over 8 KV heads, head_dim 64, f16 pages) with the decode-time sparse methods at budget 1024
// against dense attention, at 2K, 4K and 8K cached tokens: the selection and the attention it
// leads to, as PagedKvCache::attend runs them in a decode step. RocketKV is left out (its stage 2
// needs the stage-1 prefill it runs inside a session; `kvslim bench` measures it).
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "kv/paged_cache.h"
#include "model/config.h"
#include "press/registry.h"
#include "util/thread_pool.h"

#include "bench_data.h"

namespace {

using kvslim::bench::random_floats;

using kvslim::DType;

constexpr int kHeads = 32, kKvHeads = 8, kHeadDim = 64;
constexpr int64_t kBudget = 1024;

kvslim::ModelConfig one_layer() {
  kvslim::ModelConfig c;
  c.n_layers = 1;
  c.n_kv_heads = kKvHeads;
  c.n_heads = kHeads;
  c.head_dim = kHeadDim;
  c.n_rot = kHeadDim;
  c.dim = kHeads * kHeadDim;
  c.ffn_dim = c.dim;
  c.n_vocab = 32;
  c.context_length = 1 << 16;
  return c;
}

// The little of a session the sparse methods' begin() reads.
class BenchContext final : public kvslim::PressContext {
 public:
  explicit BenchContext(int64_t context)
      : config_(one_layer()), cache_(kvslim::kv_shape(config_, DType::F16, DType::F16), context), prompt_(context, 1) {
    kvslim::bench::fill_layer0(cache_, context, int64_t(kKvHeads) * kHeadDim);
  }
  const kvslim::ModelConfig& config() const override { return config_; }
  kvslim::PagedKvCache& cache() override { return cache_; }
  int64_t budget() const override { return kBudget; }
  const std::vector<int32_t>& prompt() const override { return prompt_; }
  int64_t n_past() const override { return int64_t(prompt_.size()); }
  int n_predict() const override { return 16; }
  uint64_t seed() const override { return 0; }
  void run_appended(const std::vector<int32_t>&, kvslim::AttentionProbe*) override {}
  void run_appended_rows(const float*, int, const kvslim::LoraAdapter*, kvslim::AttentionProbe*) override {}
  uint64_t model_fingerprint() const override { return 0; }
  std::vector<int32_t> generate_pseudo(int, kvslim::AttentionProbe*) override { return {}; }
  void keep(int, int, std::span<const int32_t>) override {}

 private:
  kvslim::ModelConfig config_;
  kvslim::PagedKvCache cache_;
  std::vector<int32_t> prompt_;
};

void bm_step(benchmark::State& state, const std::string& method, int64_t context, int threads) {
  kvslim::ThreadPool pool(threads);
  BenchContext ctx(context);
  std::unique_ptr<kvslim::Press> press;
  if (method != "full") {
    press = kvslim::make_press(method, {});
    press->begin(ctx);
    ctx.cache().set_sparse_selector(press->sparse_selector());
  }
  const auto q = random_floats(size_t(kHeads) * kHeadDim, 7);
  std::vector<float> out(q.size());
  for (auto _ : state) {
    ctx.cache().attend(0, q.data(), 1, out.data(), pool);
    benchmark::DoNotOptimize(out.data());
  }
}

const bool registered = [] {
  for (int64_t context : {int64_t(2048), int64_t(4096), int64_t(8192)})
    for (int threads : {1, 2})
      for (const char* method : {"full", "exact_topk", "quest", "sparq"}) {
        const std::string name = std::string("sparse_decode/") + method + "/ctx:" + std::to_string(context) +
                                 "/threads:" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) { bm_step(s, method, context, threads); })
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      }
  return true;
}();

}  // namespace
