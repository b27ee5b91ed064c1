// Micro-benchmarks of the block-quantised types q4_0 .. q6_k, iq4_nl and mxfp4 at Llama-3.2-1B shapes.
//
// quant_matvec reports GB/s of quantised weights streamed (cycling through >= 256 MiB of copies
// so every call reads from DRAM, as decode does), on each dot-product path (auto = the best,
// avx2, scalar). quant_matmul reports GFLOP/s (2 * n * rows * cols per call) for n = 512
// activation rows (prefill: weight tiles dequantised into the f32 GEMM).
#include <benchmark/benchmark.h>

#include <algorithm>
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
using kvslim::QuantKernel;

std::vector<uint8_t> quantized_weights(DType type, int64_t rows, int64_t cols, uint32_t seed) {
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

void bm_quant_matvec(benchmark::State& state, DType type, QuantKernel path, int64_t rows, int64_t cols, int threads) {
  kvslim::ThreadPool pool(threads);
  const std::vector<uint8_t> base = quantized_weights(type, rows, cols, 1);
  const size_t copies = std::max<size_t>(1, std::min<size_t>(64, (size_t{256} << 20) / base.size() + 1));
  std::vector<std::vector<uint8_t>> mats(copies, base);
  const std::vector<float> x = random_floats(static_cast<size_t>(cols), 2);
  std::vector<float> y(static_cast<size_t>(rows));
  size_t i = 0;
  for (auto _ : state) {
    const kvslim::WeightView w{type, mats[i].data(), rows, cols};
    kvslim::matvec(w, x.data(), y.data(), pool, path);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    i = (i + 1) % copies;
  }
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(base.size()) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void bm_quant_matmul(benchmark::State& state, DType type, int64_t rows, int64_t cols, int64_t n, int threads) {
  kvslim::ThreadPool pool(threads);
  const std::vector<uint8_t> wdata = quantized_weights(type, rows, cols, 3);
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

const char* path_name(QuantKernel p) {
  switch (p) {
    case QuantKernel::Auto: return "auto";
    case QuantKernel::Vnni: return "vnni";
    case QuantKernel::Avx2: return "avx2";
    case QuantKernel::Scalar: return "scalar";
    case QuantKernel::Neon: return "neon";
  }
  return "?";
}

const bool registered = [] {
  const DType types[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,   DType::Q2_K, DType::Q3_K,
                         DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::MXFP4};
  for (DType t : types) {
    for (QuantKernel path : {QuantKernel::Auto, QuantKernel::Avx2, QuantKernel::Scalar}) {
      for (int threads : {1, 2}) {
        const std::string name = std::string("quant_matvec/") + kvslim::dtype_name(t) + "/" + path_name(path) +
                                 "/8192x2048/threads:" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(),
                                     [=](benchmark::State& s) { bm_quant_matvec(s, t, path, 8192, 2048, threads); })
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      }
    }
  }
  for (DType t : types) {
    for (int threads : {1, 2}) {
      const std::string name =
          std::string("quant_matmul/") + kvslim::dtype_name(t) + "/2048x2048/n:512/threads:" + std::to_string(threads);
      benchmark::RegisterBenchmark(name.c_str(),
                                   [=](benchmark::State& s) { bm_quant_matmul(s, t, 2048, 2048, 512, threads); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  return true;
}();

}  // namespace
