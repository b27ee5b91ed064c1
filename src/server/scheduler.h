// The server's engine side: N slots, a bounded queue of jobs, and one thread that gives every busy
// slot one step in turn (round-robin, so a long prompt or answer cannot starve the others). All
// slots share one ThreadPool, used only from this thread. A total KV memory cap (--kv-mem) is kept
// by admitting a job only when the worst case of every running job fits, after dropping idle slots'
// caches if needed; a job that alone exceeds the cap is refused at submission.
#pragma once

#include <nlohmann/json.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "server/job.h"
#include "server/metrics.h"
#include "server/slot.h"

namespace kvslim::server {

struct SchedulerOptions {
  int n_slots = 1;
  size_t queue_size = 16;     // jobs waiting for a slot; more are refused (503)
  uint64_t kv_mem_bytes = 0;  // 0: no cap
  EngineOptions engine;
};

class Scheduler {
 public:
  Scheduler(const Model& model, ThreadPool& pool, const SchedulerOptions& options, Metrics& metrics);
  ~Scheduler();  // cancels what is queued or running and joins the thread
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  enum class Submitted { ok, queue_full };
  // Throws RequestError (400) when the job alone needs more KV memory than the cap.
  Submitted submit(std::shared_ptr<GenerationJob> job);

  // The admission estimate of a job: its whole prompt and n_predict tokens, uncompressed.
  uint64_t kv_bytes_needed(size_t prompt_tokens, int n_predict) const;

  nlohmann::json slots_json() const;
  // Cancels every queued and running job (shutdown: handlers waiting on them return at once).
  void cancel_all();
  int n_slots() const { return int(slots_.size()); }
  // Runs `action` on slot `id` while no job can use it. Throws RequestError 404 for an unknown
  // slot and 409 when the slot is busy.
  nlohmann::json with_idle_slot(int id, const std::function<nlohmann::json(Slot&)>& action);

 private:
  void loop();
  void admit();                                        // under mutex_
  int choose_slot(const GenerationJob& job) const;     // under mutex_; -1 when none is free
  bool make_room(const GenerationJob& job, int slot);  // under mutex_
  void publish_queue();                                // under mutex_
  void publish_bytes(uint64_t transient = 0);          // under mutex_

  const Model& model_;
  ThreadPool& pool_;
  SchedulerOptions options_;
  Metrics& metrics_;
  std::vector<std::unique_ptr<Slot>> slots_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<GenerationJob>> queue_;
  std::vector<bool> busy_;                            // a job runs, or an action holds the slot
  std::vector<uint64_t> reserved_;                    // admission estimate of the running job (0 when idle)
  std::vector<uint64_t> bytes_;                       // KV bytes each slot held after its last step or action
  std::vector<std::shared_ptr<GenerationJob>> jobs_;  // the job each slot runs (null when idle)
  std::vector<int> running_;                          // slots the loop steps (owned by the loop thread)
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kvslim::server
