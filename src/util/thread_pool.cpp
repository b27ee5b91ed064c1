#include "util/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KVSLIM_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define KVSLIM_CPU_RELAX() asm volatile("yield" ::: "memory")
#else
#define KVSLIM_CPU_RELAX() ((void)0)
#endif

namespace kvslim {
namespace {

// How long an idle worker spins before blocking, and how long the caller spins waiting for the
// workers before it starts yielding its core.
constexpr auto kWorkerSpin = std::chrono::microseconds(300);
constexpr int kCallerSpinsBeforeYield = 1 << 14;

thread_local int tls_job_depth = 0;

struct JobScope {
  JobScope() { ++tls_job_depth; }
  ~JobScope() { --tls_job_depth; }
};

}  // namespace

bool ThreadPool::in_pool_job() { return tls_job_depth > 0; }

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true, std::memory_order_seq_cst);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  {
    std::lock_guard lock(mutex_);
  }
  wake_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::execute(int index) {
  JobScope scope;
  try {
    invoke_(ctx_, index, n_threads_);
  } catch (...) {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = std::current_exception();
    has_error_.store(true, std::memory_order_relaxed);
  }
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    if (gen == seen) {
      // Spin for a while: the next dispatch usually follows within microseconds.
      auto deadline = std::chrono::steady_clock::now() + kWorkerSpin;
      for (int spins = 1;; ++spins) {
        KVSLIM_CPU_RELAX();
        gen = generation_.load(std::memory_order_acquire);
        if (gen != seen) break;
        if ((spins & 63) == 0 && std::chrono::steady_clock::now() > deadline) {
          std::unique_lock lock(mutex_);
          sleepers_.fetch_add(1, std::memory_order_seq_cst);
          wake_cv_.wait(lock, [&] { return generation_.load(std::memory_order_seq_cst) != seen; });
          sleepers_.fetch_sub(1, std::memory_order_relaxed);
          gen = generation_.load(std::memory_order_acquire);
          break;
        }
      }
    }
    seen = gen;
    if (stopping_.load(std::memory_order_acquire)) return;
    execute(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::dispatch(Invoke invoke, void* ctx) {
  if (n_threads_ == 1 || in_pool_job()) {
    JobScope scope;
    invoke(ctx, 0, 1);
    return;
  }
  std::lock_guard dispatch_lock(dispatch_mutex_);
  invoke_ = invoke;
  ctx_ = ctx;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_seq_cst);  // publishes the job (release)
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard lock(mutex_); }
    wake_cv_.notify_all();
  }
  execute(0);
  for (int spins = 1; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < kCallerSpinsBeforeYield) {
      KVSLIM_CPU_RELAX();
    } else {
      std::this_thread::yield();
    }
  }
  if (has_error_.load(std::memory_order_relaxed)) {
    std::exception_ptr error;
    {
      std::lock_guard lock(mutex_);
      error = std::exchange(error_, nullptr);
      has_error_.store(false, std::memory_order_relaxed);
    }
    std::rethrow_exception(error);
  }
}

void ThreadPool::run(const std::function<void(int, int)>& fn) { run_fn(fn); }

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  parallel_for_fn(n, fn, grain);
}

}  // namespace kvslim
