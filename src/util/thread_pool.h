// A fixed pool of worker threads for data-parallel loops. The calling thread takes part, so
// a pool of n threads starts n-1 workers. Dispatch allocates nothing, which keeps the decode
// hot path allocation-free.
//
// Dispatch is low-latency: workers spin briefly on an atomic job word after each job (decode
// issues ~150 dispatches per token) and only then block on a condition variable. Thread
// indices are claimed atomically: the caller runs index 0 and then any index no worker has
// claimed yet, so a descheduled or sleeping worker never stalls a dispatch (which OS thread runs
// a given index is therefore unspecified; each index runs exactly once).
// A call to run()/parallel_for() from inside a job of the same or another pool runs the work
// inline on the calling thread (as a pool of one), so nesting cannot deadlock. An exception
// thrown by the job on any thread is rethrown by run() on the caller after all indices finish.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace kvslim {

class ThreadPool {
 public:
  // n_threads <= 0 means one thread per hardware core.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(thread_index, n_threads) once on every thread of the pool and waits for all.
  void run(const std::function<void(int, int)>& fn);

  // Splits [0, n) into contiguous ranges, one per thread (ranges are multiples of `grain`
  // except the last), and calls fn(begin, end) for each non-empty one.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

  // The same two operations for any callable, without wrapping it in a std::function (so a
  // lambda with many captures never allocates). Prefer these on hot paths.
  template <class F>
  void run_fn(F&& fn) {
    using Fn = std::remove_reference_t<F>;
    dispatch([](void* ctx, int t, int nt) { (*static_cast<Fn*>(ctx))(t, nt); },
             const_cast<void*>(static_cast<const volatile void*>(&fn)));
  }
  template <class F>
  void parallel_for_fn(int64_t n, F&& fn, int64_t grain = 1) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    const int64_t chunks = (n + grain - 1) / grain;
    if (chunks == 1 || n_threads_ == 1 || in_pool_job()) {
      fn(int64_t{0}, n);
      return;
    }
    run_fn([&](int t, int nt) {
      const int64_t begin = chunks * t / nt * grain;
      const int64_t end = chunks * (t + 1) / nt * grain;
      const int64_t e = end < n ? end : n;
      if (begin < e) fn(begin, e);
    });
  }

  // True on a thread that is currently executing a job of some pool.
  static bool in_pool_job();

 private:
  using Invoke = void (*)(void* ctx, int t, int nt);
  void dispatch(Invoke invoke, void* ctx);
  void worker_loop();
  // Claims and runs indices of job `gen` until none is left; returns when all are claimed.
  void run_claimed(uint32_t gen);
  void execute(int index);

  int n_threads_;
  std::vector<std::thread> workers_;

  // The current job, published by the release store of job_word_.
  Invoke invoke_ = nullptr;
  void* ctx_ = nullptr;
  uint32_t generation_ = 0;  // only touched by the dispatching thread

  // (generation << 32) | next unclaimed thread index.
  alignas(64) std::atomic<uint64_t> job_word_{0};
  alignas(64) std::atomic<int> pending_{0};  // indices not yet finished
  alignas(64) std::atomic<int> sleepers_{0};
  std::atomic<bool> stopping_{false};

  std::mutex mutex_;  // guards the blocking path and error_
  std::condition_variable wake_cv_;
  std::exception_ptr error_;
  std::atomic<bool> has_error_{false};
  std::mutex dispatch_mutex_;  // serialises concurrent dispatches from different threads
};

}  // namespace kvslim
