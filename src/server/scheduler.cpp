#include "server/scheduler.h"

#include <algorithm>

#include "server/request_error.h"

namespace kvslim::server {

Scheduler::Scheduler(const Model& model, ThreadPool& pool, const SchedulerOptions& options, Metrics& metrics)
    : model_(model), pool_(pool), options_(options), metrics_(metrics) {
  for (int i = 0; i < options.n_slots; ++i) slots_.push_back(std::make_unique<Slot>(i, model, pool, options.engine));
  busy_.assign(slots_.size(), false);
  reserved_.assign(slots_.size(), 0);
  bytes_.assign(slots_.size(), 0);
  jobs_.assign(slots_.size(), nullptr);
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

uint64_t Scheduler::kv_bytes_needed(size_t prompt_tokens, int n_predict) const {
  return kv_bytes_for(model_.config(), options_.engine,
                      std::min<int64_t>(options_.engine.context, int64_t(prompt_tokens) + n_predict));
}

Scheduler::Submitted Scheduler::submit(std::shared_ptr<GenerationJob> job) {
  job->kv_bytes_needed = kv_bytes_needed(job->prompt.size(), job->n_predict);
  if (options_.kv_mem_bytes > 0 && job->kv_bytes_needed > options_.kv_mem_bytes)
    throw RequestError(
        400, "max_tokens",
        fmt::format("this request needs up to {:.1f} MiB of KV cache ({} prompt tokens + max_tokens {}), "
                    "more than the server's --kv-mem of {:.1f} MiB; shorten the prompt or lower max_tokens",
                    double(job->kv_bytes_needed) / (1 << 20), job->prompt.size(), job->n_predict,
                    double(options_.kv_mem_bytes) / (1 << 20)));
  {
    std::lock_guard lock(mutex_);
    if (queue_.size() >= options_.queue_size) return Submitted::queue_full;
    queue_.push_back(std::move(job));
    publish_queue();
  }
  wake_.notify_all();
  return Submitted::ok;
}

void Scheduler::publish_queue() {
  const auto running = std::count_if(reserved_.begin(), reserved_.end(), [](uint64_t r) { return r > 0; });
  metrics_.queue(int(running), int(queue_.size()));
}

int Scheduler::choose_slot(const GenerationJob& job) const {
  // A shared prefix shorter than this is not worth a slot's cache (a BOS token, a system line).
  constexpr size_t kWorthReusing = 16;
  const std::string key = compression_key(job.compression);
  int best = -1;
  size_t best_reuse = 0;
  bool best_empty = false;
  for (int i = 0; i < int(slots_.size()); ++i) {
    if (busy_[i]) continue;
    const Slot& s = *slots_[i];
    size_t reuse = s.reusable(job.prompt, key);
    if (reuse < kWorthReusing && reuse + 1 < job.prompt.size()) reuse = 0;
    const bool empty = s.tokens().empty();
    // The longest shared prefix first, then a slot with nothing to lose, then the least recently used.
    const bool better = best < 0 || reuse > best_reuse || (reuse == best_reuse && empty && !best_empty) ||
                        (reuse == best_reuse && empty == best_empty && s.last_used() < slots_[best]->last_used());
    if (better) {
      best = i;
      best_reuse = reuse;
      best_empty = empty;
    }
  }
  return best;
}

bool Scheduler::make_room(const GenerationJob& job, int slot) {
  if (options_.kv_mem_bytes == 0) return true;
  auto used = [&] {
    uint64_t sum = 0;
    for (size_t i = 0; i < slots_.size(); ++i)
      if (int(i) != slot) sum += reserved_[i] > 0 ? reserved_[i] : bytes_[i];
    return sum;
  };
  if (used() + job.kv_bytes_needed <= options_.kv_mem_bytes) return true;
  // Drop idle caches, least recently used first, until the job fits.
  std::vector<int> idle;
  for (int i = 0; i < int(slots_.size()); ++i)
    if (i != slot && !busy_[i] && bytes_[i] > 0) idle.push_back(i);
  std::sort(idle.begin(), idle.end(), [&](int a, int b) { return slots_[a]->last_used() < slots_[b]->last_used(); });
  for (int i : idle) {
    slots_[i]->reset();
    bytes_[i] = 0;
    if (used() + job.kv_bytes_needed <= options_.kv_mem_bytes) return true;
  }
  return false;
}

void Scheduler::admit() {
  while (!queue_.empty()) {
    std::shared_ptr<GenerationJob> job = queue_.front();
    if (job->cancelled.load()) {
      queue_.pop_front();
      JobResult r;
      r.finish_reason = "cancelled";
      job->finish(std::move(r));
      continue;
    }
    const int slot = choose_slot(*job);
    if (slot < 0 || !make_room(*job, slot)) break;  // first come, first served: wait
    queue_.pop_front();
    busy_[slot] = true;
    reserved_[slot] = std::max<uint64_t>(1, job->kv_bytes_needed);
    jobs_[slot] = job;
    slots_[slot]->start(std::move(job));
    running_.push_back(slot);
  }
  publish_queue();
}

void Scheduler::loop() {
  size_t turn = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      if (stopping_) break;
      admit();
      if (running_.empty()) {
        wake_.wait(lock);
        continue;
      }
    }
    // One step of one slot per iteration, taking turns; admission runs between steps so a new
    // request starts as soon as a slot is free.
    turn %= running_.size();
    const int id = running_[turn];
    Slot& slot = *slots_[id];
    const bool done = slot.step();
    metrics_.evicted(slot.evicted_last_step());
    const uint64_t bytes = slot.kv_bytes();
    const uint64_t peak = slot.kv_peak_bytes();
    std::lock_guard lock(mutex_);
    bytes_[id] = bytes;
    publish_bytes(peak - std::min(peak, bytes));
    if (done) {
      const JobResult& r = slot.result();
      metrics_.generation(r.n_prompt, r.n_reused, r.n_generated, r.prefill_ms, r.decode_ms, r.score_ms, r.kept_tokens,
                          r.finish_reason == "cancelled");
      running_.erase(running_.begin() + int64_t(turn));
      busy_[id] = false;
      reserved_[id] = 0;
      jobs_[id] = nullptr;
      publish_queue();
      slot.deliver();
    } else {
      ++turn;
    }
  }
  // Shutting down: nothing is left waiting forever.
  std::lock_guard lock(mutex_);
  for (int id : running_) {
    slots_[id]->job()->cancelled = true;
    slots_[id]->step();
    slots_[id]->deliver();
  }
  for (auto& job : queue_) job->finish(JobResult{}, std::string("the server is shutting down"));
  queue_.clear();
}

void Scheduler::publish_bytes(uint64_t transient) {
  uint64_t total = 0;
  for (uint64_t b : bytes_) total += b;
  // The stepped slot may have held more during the step (a prefill before eviction): its
  // session's peak bounds that, so the process peak counts it on top of the others' bytes.
  metrics_.kv_bytes(total, total + transient);
}

void Scheduler::cancel_all() {
  std::lock_guard lock(mutex_);
  for (auto& job : queue_) job->cancelled = true;
  for (auto& job : jobs_)
    if (job) job->cancelled = true;
  wake_.notify_all();
}

nlohmann::json Scheduler::slots_json() const {
  std::lock_guard lock(mutex_);
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < slots_.size(); ++i) out.push_back(slots_[i]->info(busy_[i]));
  return out;
}

nlohmann::json Scheduler::with_idle_slot(int id, const std::function<nlohmann::json(Slot&)>& action) {
  {
    std::lock_guard lock(mutex_);
    if (id < 0 || id >= int(slots_.size()))
      throw RequestError(
          404, "id",
          fmt::format("no slot {} (the server has {} slots: 0 to {})", id, slots_.size(), slots_.size() - 1));
    if (busy_[id]) throw RequestError(409, "id", fmt::format("slot {} is processing a request; try again later", id));
    busy_[id] = true;
  }
  auto release = [&] {
    {
      std::lock_guard lock(mutex_);
      busy_[id] = false;
      bytes_[id] = slots_[id]->kv_bytes();
      publish_bytes();
    }
    wake_.notify_all();
  };
  try {
    nlohmann::json out = action(*slots_[id]);
    release();
    return out;
  } catch (...) {
    release();
    throw;
  }
}

}  // namespace kvslim::server
