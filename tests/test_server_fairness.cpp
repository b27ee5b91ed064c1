// Fair prefill between the server's slots (in process, the scheduler and two slots): while slot A
// prefills a long prompt, slot B, already generating, keeps producing tokens, one per prefill
// block of A. Asserted on the order of events (every event carries the scheduler thread's clock,
// read when it was produced), never on durations, so a loaded machine changes nothing: B's tokens
// produced between A's admission and A's first token are counted. With the whole prompt as one
// step (the old scheduler) B would get at most two in there; with blocks it gets about one per
// block.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "model/model.h"
#include "server/metrics.h"
#include "server/scheduler.h"
#include "server_helpers.h"
#include "util/thread_pool.h"

namespace kvslim {
namespace {

using server::GenerationJob;
using server::Scheduler;

std::shared_ptr<GenerationJob> job(std::vector<int32_t> prompt, int n_predict) {
  auto j = std::make_shared<GenerationJob>();
  j->prompt = std::move(prompt);
  j->n_predict = n_predict;
  j->sampling.temperature = 0;  // greedy
  return j;
}

// Waits (bounded: 60 s) until `ready` holds under the job's lock.
template <class F>
bool wait_for(GenerationJob& j, F ready) {
  std::unique_lock lock(j.mutex);
  return j.cv.wait_for(lock, std::chrono::seconds(60), [&] { return ready(); });
}

TEST(ServerFairness, DecodingSlotKeepsGoingWhileAnotherPrefills) {
  constexpr int kBlock = 16;
  const std::unique_ptr<Model> model = Model::load(testing::default_model());
  const Tokenizer& tok = model->tokenizer();
  ThreadPool pool(2);
  server::Metrics metrics;
  server::SchedulerOptions options;
  options.n_slots = 2;
  options.engine.batch = kBlock;
  options.engine.context = 4096;
  Scheduler scheduler(*model, pool, options, metrics);

  // B: greedy on "b", the small model repeats one token and does not stop by itself.
  auto b = job(tok.encode("b", true, false), 4000);
  ASSERT_EQ(scheduler.submit(b), Scheduler::Submitted::ok);
  // Whatever B held from before A, it is decoding now.
  ASSERT_TRUE(wait_for(*b, [&] { return !b->events.empty() || b->done; }));

  std::string text;
  for (int i = 0; i < 200; ++i) text += fmt::format(" w{}", i % 10);
  auto a = job(tok.encode(text, true, false), 1);
  const int blocks = int((a->prompt.size() + kBlock - 1) / kBlock);
  ASSERT_GE(blocks, 20);
  ASSERT_EQ(scheduler.submit(a), Scheduler::Submitted::ok);
  ASSERT_TRUE(wait_for(*a, [&] { return a->done; }));
  b->cancelled = true;
  ASSERT_TRUE(wait_for(*b, [&] { return b->done; }));

  ASSERT_FALSE(a->error) << *a->error;
  ASSERT_EQ(a->result.n_generated, 1);
  ASSERT_FALSE(a->events.empty());
  const auto a_admitted = a->result.admitted;
  const auto a_first = a->events.front().time;
  ASSERT_LT(a_admitted, a_first);
  int during = 0;
  for (const auto& e : b->events)
    if (e.id >= 0 && e.time > a_admitted && e.time < a_first) ++during;
  // Round-robin over two running slots: one B token per A block (the last block's turn goes
  // straight on to A's first token), so blocks - 1; a little slack for where B's turn fell.
  EXPECT_GE(during, blocks - 3) << "B stalled while A prefilled " << a->prompt.size() << " tokens in " << blocks
                                << " blocks";
  EXPECT_LE(during, blocks + 1);
  EXPECT_LT(b->result.n_generated, 4000) << "B was still running when A finished";
  EXPECT_EQ(b->result.finish_reason, "cancelled");
}

}  // namespace
}  // namespace kvslim
