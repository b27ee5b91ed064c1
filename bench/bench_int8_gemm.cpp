// Micro-benchmark of prefill's two int8 GEMMs (AVX-512 VNNI and AMX-INT8 tiles; "vnni" is the
// level's vector kernel, AVX2's maddubs one on an AVX2 CPU) on the same weights, at the
// Llama-3.2-1B MLP shapes (gate/up 8192x2048, down 2048x8192) for n = 512 tokens, and at a
// mixture-of-experts prefill's shape: Qwen3-30B-A3B's expert (768x2048) for the 32 tokens an
// expert gets on average from a 512-token block (8 of 128 experts), cycling through 64 experts
// (more bytes than the L3 holds) so that the weights come from memory as in a real prefill.
// Reports GFLOP/s (2 * n * rows * cols per call); the two paths give identical bits, so the
// ratio of the two rows is the whole story.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/matmul_internal.h"
#include "util/thread_pool.h"

namespace {

using kvslim::DType;
using kvslim::detail::Int8Gemm;

void bm_int8_gemm(benchmark::State& state, DType type, Int8Gemm path, int64_t rows, int64_t cols, int64_t n,
                  int threads, int matrices) {
  if (!kvslim::detail::matmul_q8_available() || (path == Int8Gemm::Amx && !kvslim::detail::amx_int8_usable())) {
    state.SkipWithError("path not available on this machine");
    return;
  }
  kvslim::ThreadPool pool(threads);
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> wf(static_cast<size_t>(rows * cols));
  for (auto& v : wf) v = dist(rng);
  const size_t rb = kvslim::row_bytes(type, cols);
  const size_t matrix_bytes = rb * static_cast<size_t>(rows);
  std::vector<uint8_t> wdata(matrix_bytes * static_cast<size_t>(matrices));
  for (int64_t r = 0; r < rows; ++r) kvslim::convert_from_f32(wf.data() + r * cols, type, wdata.data() + rb * r, cols);
  for (int m = 1; m < matrices; ++m)  // the same values: only where they lie matters here
    std::copy_n(wdata.data(), matrix_bytes, wdata.data() + matrix_bytes * static_cast<size_t>(m));
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (auto& v : x) v = dist(rng) * 50.0f;
  std::vector<float> y(static_cast<size_t>(n * rows));
  int m = 0;
  for (auto _ : state) {
    const kvslim::WeightView w{type, wdata.data() + matrix_bytes * static_cast<size_t>(m), rows, cols};
    m = (m + 1) % matrices;
    kvslim::detail::matmul_q8(w, x.data(), n, y.data(), pool, path);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(n) * rows * cols / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

const bool registered = [] {
  struct Shape {
    int64_t rows, cols, n;
    int matrices;
  };
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::MXFP4}) {
    for (Shape s : {Shape{8192, 2048, 512, 1}, Shape{2048, 8192, 512, 1}, Shape{768, 2048, 32, 64}}) {
      for (int threads : {1, 2})
        for (Int8Gemm path : {Int8Gemm::Vnni, Int8Gemm::Amx}) {
          const std::string name =
              std::string("int8_gemm/") + kvslim::dtype_name(t) + "/" + (path == Int8Gemm::Amx ? "amx" : "vnni") + "/" +
              std::to_string(s.rows) + "x" + std::to_string(s.cols) + "/n:" + std::to_string(s.n) +
              (s.matrices > 1 ? "/experts:" + std::to_string(s.matrices) : "") + "/threads:" + std::to_string(threads);
          benchmark::RegisterBenchmark(
              name.c_str(),
              [=](benchmark::State& st) { bm_int8_gemm(st, t, path, s.rows, s.cols, s.n, threads, s.matrices); })
              ->Unit(benchmark::kMillisecond)
              ->UseRealTime();
        }
    }
  }
  return true;
}();

}  // namespace
