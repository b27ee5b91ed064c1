// Micro-benchmarks of the tensor kernels at Llama-3.2-1B shapes (dim 2048, ffn 8192).
//
// matvec reports GB/s of weights streamed: it cycles through enough copies of the matrix
// (>= 256 MiB in all) that every call reads from DRAM, as decode does. matmul reports FLOP/s
// (2 * n * rows * cols per call) for n = 512 activation rows (prefill).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/ops.h"
#include "util/thread_pool.h"

#include "bench_data.h"

namespace {

using kvslim::bench::random_floats;

using kvslim::DType;

std::vector<uint8_t> random_weights(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> row(static_cast<size_t>(cols));
  const size_t rb = kvslim::row_bytes(type, cols);
  std::vector<uint8_t> out(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : row) v = dist(rng);
    kvslim::convert_from_f32(row.data(), type, out.data() + rb * static_cast<size_t>(r), cols);
  }
  return out;
}

void bm_matvec(benchmark::State& state, DType type, int64_t rows, int64_t cols, int threads) {
  kvslim::ThreadPool pool(threads);
  const std::vector<uint8_t> base = random_weights(type, rows, cols, 1);
  const size_t copies = std::max<size_t>(1, std::min<size_t>(64, (size_t{256} << 20) / base.size() + 1));
  std::vector<std::vector<uint8_t>> mats(copies, base);
  const std::vector<float> x = random_floats(static_cast<size_t>(cols), 2);
  std::vector<float> y(static_cast<size_t>(rows));
  size_t i = 0;
  for (auto _ : state) {
    const kvslim::WeightView w{type, mats[i].data(), rows, cols};
    kvslim::matvec(w, x.data(), y.data(), pool);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    i = (i + 1) % copies;
  }
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(base.size()) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void bm_matmul(benchmark::State& state, DType type, int64_t rows, int64_t cols, int64_t n, int threads) {
  kvslim::ThreadPool pool(threads);
  const std::vector<uint8_t> wdata = random_weights(type, rows, cols, 3);
  const std::vector<float> x = random_floats(static_cast<size_t>(n * cols), 4);
  std::vector<float> y(static_cast<size_t>(n * rows));
  const kvslim::WeightView w{type, wdata.data(), rows, cols};
  for (auto _ : state) {
    kvslim::matmul(w, x.data(), n, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(n) * rows * cols / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void bm_dispatch(benchmark::State& state, int threads) {
  kvslim::ThreadPool pool(threads);
  std::atomic<int64_t> sink{0};
  for (auto _ : state) {
    pool.run_fn([&](int t, int) { sink.fetch_add(t, std::memory_order_relaxed); });
  }
  benchmark::DoNotOptimize(sink.load());
}

void bm_rmsnorm(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto x = random_floats(static_cast<size_t>(n), 5);
  const auto wt = random_floats(static_cast<size_t>(n), 6);
  std::vector<float> y(static_cast<size_t>(n));
  for (auto _ : state) {
    kvslim::rmsnorm(x.data(), wt.data(), y.data(), n, 1e-5f);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void bm_softmax(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto x0 = random_floats(static_cast<size_t>(n), 7);
  std::vector<float> x = x0;
  for (auto _ : state) {
    std::memcpy(x.data(), x0.data(), x.size() * sizeof(float));
    kvslim::softmax_inplace(x.data(), n);
    benchmark::DoNotOptimize(x.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void bm_swiglu(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto g = random_floats(static_cast<size_t>(n), 8);
  const auto u = random_floats(static_cast<size_t>(n), 9);
  std::vector<float> out(static_cast<size_t>(n));
  for (auto _ : state) {
    kvslim::swiglu(g.data(), u.data(), out.data(), n);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void bm_rope(benchmark::State& state) {
  auto x = random_floats(32 * 64, 10);
  kvslim::RopeConfig cfg;
  cfg.head_dim = 64;
  cfg.n_rot = 64;
  cfg.base = 500000.0f;
  int64_t pos = 0;
  for (auto _ : state) {
    kvslim::rope_inplace(x.data(), 32, pos++ & 1023, cfg);
    benchmark::DoNotOptimize(x.data());
  }
}

void bm_convert_f16(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto x = random_floats(static_cast<size_t>(n), 11);
  std::vector<uint16_t> h(static_cast<size_t>(n));
  std::vector<float> back(static_cast<size_t>(n));
  for (auto _ : state) {
    kvslim::convert_from_f32(x.data(), DType::F16, h.data(), n);
    kvslim::convert_to_f32(DType::F16, h.data(), back.data(), n);
    benchmark::DoNotOptimize(back.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

const bool registered = [] {
  const DType types[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0};
  const std::pair<int64_t, int64_t> mv_shapes[] = {{2048, 2048}, {8192, 2048}};
  for (DType t : types) {
    for (auto [rows, cols] : mv_shapes) {
      for (int threads : {1, 2}) {
        const std::string name = std::string("matvec/") + kvslim::dtype_name(t) + "/" + std::to_string(rows) + "x" +
                                 std::to_string(cols) + "/threads:" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) { bm_matvec(s, t, rows, cols, threads); })
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      }
    }
  }
  const std::pair<int64_t, int64_t> mm_shapes[] = {{2048, 2048}, {8192, 2048}, {2048, 8192}};
  // Prefill also for the int8 GEMM's main schemes: q4_0 (one plane), q4_K (mins), q6_K (halves).
  const DType mm_types[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K};
  for (DType t : mm_types) {
    for (auto [rows, cols] : mm_shapes) {
      for (int threads : {1, 2}) {
        const std::string name = std::string("matmul/") + kvslim::dtype_name(t) + "/" + std::to_string(rows) + "x" +
                                 std::to_string(cols) + "/n:512/threads:" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(),
                                     [=](benchmark::State& s) { bm_matmul(s, t, rows, cols, 512, threads); })
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
    }
  }
  for (int threads : {1, 2}) {
    benchmark::RegisterBenchmark((std::string("pool/dispatch/threads:") + std::to_string(threads)).c_str(),
                                 [=](benchmark::State& s) { bm_dispatch(s, threads); })
        ->UseRealTime();
  }
  benchmark::RegisterBenchmark("ops/rmsnorm", bm_rmsnorm)->Arg(2048);
  benchmark::RegisterBenchmark("ops/softmax", bm_softmax)->Arg(2048);
  benchmark::RegisterBenchmark("ops/swiglu", bm_swiglu)->Arg(8192);
  benchmark::RegisterBenchmark("ops/rope/32x64", bm_rope);
  benchmark::RegisterBenchmark("ops/convert_f16_roundtrip", bm_convert_f16)->Arg(8192);
  return true;
}();

}  // namespace
