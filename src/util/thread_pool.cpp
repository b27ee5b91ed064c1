#include "util/thread_pool.h"

#include "util/op_profile.h"

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

// How long an idle worker spins before blocking, and how many pause rounds (~20-40 us) the
// caller spins waiting for claimed indices to finish before it sleeps.
constexpr auto kWorkerSpin = std::chrono::microseconds(300);
constexpr int kCallerSpins = 1024;

thread_local int tls_job_depth = 0;

struct JobScope {
  JobScope() { ++tls_job_depth; }
  ~JobScope() { --tls_job_depth; }
};

inline uint32_t word_gen(uint64_t w) { return static_cast<uint32_t>(w >> 32); }
inline uint32_t word_index(uint64_t w) { return static_cast<uint32_t>(w); }

}  // namespace

bool ThreadPool::in_pool_job() { return tls_job_depth > 0; }

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true, std::memory_order_seq_cst);
  // A new generation with nothing to claim wakes every worker, which then sees stopping_.
  job_word_.store((static_cast<uint64_t>(generation_ + 1) << 32) | static_cast<uint32_t>(n_threads_),
                  std::memory_order_seq_cst);
  { std::lock_guard lock(mutex_); }
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

void ThreadPool::run_claimed(uint32_t gen) {
  uint64_t w = job_word_.load(std::memory_order_acquire);
  for (;;) {
    if (word_gen(w) != gen || word_index(w) >= static_cast<uint32_t>(n_threads_)) return;
    if (job_word_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
      execute(static_cast<int>(word_index(w)));
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
      w = job_word_.load(std::memory_order_acquire);
    }
  }
}

void ThreadPool::worker_loop() {
  uint32_t seen = 0;
  for (;;) {
    uint64_t w = job_word_.load(std::memory_order_acquire);
    if (word_gen(w) == seen) {
      // Spin for a while: the next dispatch usually follows within microseconds.
      const auto deadline = std::chrono::steady_clock::now() + kWorkerSpin;
      for (int spins = 1;; ++spins) {
        KVSLIM_CPU_RELAX();
        w = job_word_.load(std::memory_order_acquire);
        if (word_gen(w) != seen) break;
        if ((spins & 63) == 0 && std::chrono::steady_clock::now() > deadline) {
          std::unique_lock lock(mutex_);
          sleepers_.fetch_add(1, std::memory_order_seq_cst);
          wake_cv_.wait(lock, [&] { return word_gen(job_word_.load(std::memory_order_seq_cst)) != seen; });
          sleepers_.fetch_sub(1, std::memory_order_relaxed);
          w = job_word_.load(std::memory_order_acquire);
          break;
        }
      }
    }
    seen = word_gen(w);
    if (stopping_.load(std::memory_order_acquire)) return;
    run_claimed(seen);
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
  const uint32_t gen = ++generation_;
  pending_.store(n_threads_, std::memory_order_relaxed);
  // Index 0 is the caller's: publish the job with index 1 as the next one to claim.
  job_word_.store((static_cast<uint64_t>(gen) << 32) | 1u, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard lock(mutex_); }
    wake_cv_.notify_all();
  }
  execute(0);
  pending_.fetch_sub(1, std::memory_order_acq_rel);
  run_claimed(gen);  // whatever the workers have not picked up yet
  ProfileScope prof(ProfOp::PoolWait);
  // Wait for indices claimed by workers: spin briefly (they normally finish within
  // microseconds of the caller), then sleep on the counter so that a worker sharing this core
  // with other processes gets the CPU.
  for (int spins = 1;; ++spins) {
    const int left = pending_.load(std::memory_order_acquire);
    if (left == 0) break;
    if (spins < kCallerSpins) {
      KVSLIM_CPU_RELAX();
    } else {
      pending_.wait(left, std::memory_order_acquire);
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
