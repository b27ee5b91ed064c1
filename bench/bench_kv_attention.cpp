// Micro-benchmarks of KV attention per page type at a Llama-3.2-1B layer (32 query heads over 8
// KV heads, head_dim 64): one decode step (one query per head over `context` cached tokens) and
// one prefill block of 512 queries. Reports the KV bytes a decode step reads per second, so that
// f16/bf16/q8_0 pages can be compared with f32 pages back to back.
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "kv/paged_cache.h"
#include "util/thread_pool.h"

#include "bench_data.h"

namespace {

using kvslim::bench::random_floats;

using kvslim::DType;

constexpr int kHeads = 32, kKvHeads = 8, kHeadDim = 64;

// A one-layer cache holding `context` tokens per KV head in `type` pages.
std::unique_ptr<kvslim::PagedKvCache> filled_cache(DType type, int64_t context, int64_t extra) {
  auto cache = std::make_unique<kvslim::PagedKvCache>(
      kvslim::KvShape{1, kHeads, kKvHeads, kHeadDim, type, type, {}, {}}, context + extra);
  kvslim::bench::fill_layer0(*cache, context, int64_t(kKvHeads) * kHeadDim);
  return cache;
}

void bm_decode(benchmark::State& state, DType type, int64_t context, int threads) {
  kvslim::ThreadPool pool(threads);
  const auto cache = filled_cache(type, context, 0);
  const auto q = random_floats(size_t(kHeads) * kHeadDim, 7);
  std::vector<float> out(q.size());
  for (auto _ : state) {
    cache->attend(0, q.data(), 1, out.data(), pool);  // the last cached token is the query's own
    benchmark::DoNotOptimize(out.data());
  }
  const double bytes = double(context) * kKvHeads * 2 * kvslim::row_bytes(type, kHeadDim);
  state.counters["KV_GB/s"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void bm_prefill(benchmark::State& state, DType type, int64_t context, int threads) {
  kvslim::ThreadPool pool(threads);
  const auto cache = filled_cache(type, context, 0);
  const auto q = random_floats(size_t(512) * kHeads * kHeadDim, 9);
  std::vector<float> out(q.size());
  for (auto _ : state) {
    cache->attend(0, q.data(), 512, out.data(), pool);  // the last 512 cached tokens as the block
    benchmark::DoNotOptimize(out.data());
  }
}

const bool registered = [] {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
    for (int64_t context : {int64_t(512), int64_t(4096)}) {
      for (int threads : {1, 2}) {
        const std::string name = std::string("kv_attention/decode/") + kvslim::dtype_name(t) +
                                 "/ctx:" + std::to_string(context) + "/threads:" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) { bm_decode(s, t, context, threads); })
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      }
    }
    // A 512-token prompt (ctx 512: the block is the whole cache) and a block deep in a long one.
    for (int64_t context : {int64_t(512), int64_t(4096)}) {
      const std::string name = std::string("kv_attention/prefill512/") + kvslim::dtype_name(t) +
                               "/ctx:" + std::to_string(context) + "/threads:2";
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) { bm_prefill(s, t, context, 2); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  return true;
}();

}  // namespace
