// Per-op wall-clock profile of the forward pass (`kvslim bench --profile`).
//
// Off by default: then a ProfileScope costs one relaxed load and a branch. When on, the
// thread that drives the forward pass (the pool's caller) adds the time of each scoped op to a
// global table, so a decode step is broken into matvecs, attention, norms, RoPE, sampling and
// the time the caller waits for pool workers after finishing its own share (synchronisation).
// Scopes nest: a matvec's time includes the pool wait inside it; the wait is also reported on
// its own line so that the two can be told apart.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string_view>

namespace kvslim {

enum class ProfOp : int {
  Embed,
  Norm,
  MatvecQKV,
  Rope,
  KvAppend,
  Attention,
  MatvecO,
  MatvecGateUp,
  Swiglu,
  MatvecDown,
  Moe,  // a mixture-of-experts FFN whole: router, experts, their sum
  Residual,
  MatvecOutput,
  PressHooks,
  Sampling,
  PoolWait,
  kCount
};

std::string_view prof_op_name(ProfOp op);

class OpProfile {
 public:
  static bool enabled() { return enabled_.load(std::memory_order_relaxed); }
  static void set_enabled(bool on) { enabled_.store(on, std::memory_order_relaxed); }
  static void reset();
  static void add(ProfOp op, int64_t ns) {
    totals_[static_cast<int>(op)].fetch_add(ns, std::memory_order_relaxed);
    counts_[static_cast<int>(op)].fetch_add(1, std::memory_order_relaxed);
  }
  static int64_t total_ns(ProfOp op) { return totals_[static_cast<int>(op)].load(std::memory_order_relaxed); }
  static int64_t count(ProfOp op) { return counts_[static_cast<int>(op)].load(std::memory_order_relaxed); }

 private:
  static std::atomic<bool> enabled_;
  static std::array<std::atomic<int64_t>, static_cast<int>(ProfOp::kCount)> totals_, counts_;
};

// Adds the scope's wall time to `op` when profiling is on.
class ProfileScope {
 public:
  explicit ProfileScope(ProfOp op) : op_(op), on_(OpProfile::enabled()) {
    if (on_) start_ = std::chrono::steady_clock::now();
  }
  ~ProfileScope() {
    if (on_) {
      OpProfile::add(
          op_, std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count());
    }
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  ProfOp op_;
  bool on_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace kvslim
