// Memory read bandwidth of this machine: the ceiling for decode, which streams every weight
// once per token. Reads a 512 MiB buffer (far beyond the caches) with 64-byte vector loads,
// split into contiguous halves across the pool's threads, and reports GB/s read. Compare with
// matvec's GB/s (bench_ops.cpp) and `kvslim bench` decode tok/s x model bytes.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <new>
#include <string>

#if defined(__AVX512F__)
#include <immintrin.h>  // a -DKVSLIM_NATIVE=ON build on an AVX-512 machine
#endif

#include "util/thread_pool.h"

namespace {

constexpr size_t kBytes = size_t{512} << 20;

// Sums the buffer as 64-bit lanes (cheap integer adds keep this a pure load stream; four
// independent accumulators keep several loads in flight).
uint64_t read_range(const uint8_t* p, size_t bytes) {
#if defined(__AVX512F__)
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 256 <= bytes; i += 256) {
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 64));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 128));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 192));
  }
  return static_cast<uint64_t>(
      _mm512_reduce_add_epi64(_mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3))));
#else
  uint64_t s[4] = {};
  for (size_t i = 0; i + 32 <= bytes; i += 32) {
    uint64_t v[4];
    std::memcpy(v, p + i, 32);
    for (int k = 0; k < 4; ++k) s[k] += v[k];
  }
  return s[0] + s[1] + s[2] + s[3];
#endif
}

void bm_read_bandwidth(benchmark::State& state, int threads) {
  kvslim::ThreadPool pool(threads);
  auto* buf = static_cast<uint8_t*>(::operator new (kBytes, std::align_val_t{64}));
  // Touch every page (and give the lines distinct values) so that reads hit real memory.
  for (size_t i = 0; i < kBytes; i += 8) {
    const uint64_t v = i * 0x9E3779B97F4A7C15ull;
    std::memcpy(buf + i, &v, 8);
  }
  uint64_t sums[64] = {};
  for (auto _ : state) {
    pool.run_fn([&](int t, int nt) {
      const size_t per = kBytes / static_cast<size_t>(nt) / 256 * 256;
      sums[t * 8 % 64] += read_range(buf + per * static_cast<size_t>(t), per);
    });
    benchmark::DoNotOptimize(sums);
  }
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(kBytes) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  ::operator delete (buf, std::align_val_t{64});
}

const bool registered = [] {
  for (int threads : {1, 2}) {
    benchmark::RegisterBenchmark((std::string("memory/read_bandwidth/threads:") + std::to_string(threads)).c_str(),
                                 [=](benchmark::State& s) { bm_read_bandwidth(s, threads); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(1.0);
  }
  return true;
}();

}  // namespace
