// `kvslim claims`: each seed paper's headline comparison posed on our model and held-out samples
// (generator seeds from 0; training uses seeds >= 1,000,000), measured with the eval harness
// (one resumable sweep per setting under OUT/) and decided by a paired 95% interval over samples
// (eval/claims_stats.h). docs/claims.md describes every setting.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "eval/claims_stats.h"
#include "eval/results.h"
#include "eval/sweep.h"

namespace kvslim::eval {

struct ClaimsPlan {
  std::vector<std::string> tasks;
  std::vector<int64_t> lengths;
  std::vector<int64_t> budgets;  // "small budgets": every one is at most 1/4 of the shortest prompt
  int samples = 0;               // per task and length
  std::string adapter;           // LookaheadKV adapter for the model; empty: its rows are not measured
  double close_margin = 0.05;    // "close to": the mean score difference within ±0.05
  int64_t block = 128;           // KeyDiff's setting: every method evicts after each prefill block of this size
  std::string mt_task = "niah_multiquery";  // RocketKV-MT's setting: its four questions asked turn by turn
  int mt_samples = 0;                       // per length, for the multi-turn sweep
};

// Budgets 64 and 128, 8 samples per task and length; --quick at 1024 tokens (under a minute on 2
// quiet cores with the default model), the full run at 1024, 2048 and 4096 (the default model's
// context; its quick part is the same runs, so running --quick first and then the full run into
// one OUT resumes). Below 64 every eviction method but LookaheadKV scores 0 on the default model:
// nothing to compare.
ClaimsPlan claims_plan(bool quick, std::string adapter);

// The five sweeps a plan runs, by subdirectory of OUT: query-agnostic (LagKV's setting), query-aware
// (DapQ, LookaheadKV, RocketKV), recall (DapQ's recall against the true-response oracle),
// block-prefill (KeyDiff's: every method evicts after each prefill block of plan.block tokens) and
// multi-turn (RocketKV-MT's: the multi-query task's questions asked one turn after another).
struct ClaimsSweep {
  std::string dir;  // subdirectory
  SweepOptions options;
  GridOptions grid;
};
std::vector<ClaimsSweep> claims_sweeps(const ClaimsPlan& plan, const std::string& out_dir);

struct ClaimRow {
  std::string paper, claim, setting;
  int64_t budget = 0;    // 0: not per budget
  std::string figures;   // our means, A vs B
  std::string interval;  // the paired difference and its 95% interval ("" when not measured)
  std::string verdict;   // agrees, disagrees, inconclusive, or "not measured"
};

// Each sweep's records, in claims_sweeps' order.
struct ClaimsRecords {
  std::vector<SampleRecord> agnostic, aware, recall, block, multi_turn;
};

// The table from the sweeps' records, restricted to the plan's tasks, lengths and seeds. Pure: no
// model runs.
std::vector<ClaimRow> claim_rows(const ClaimsPlan& plan, const ClaimsRecords& records);

// Multi-turn records (task "TASK/turnN") folded into one record per (method, budget, sample): its
// score the mean over turns first_turn.. (kv_bytes and kv_bytes_peak the largest), task "TASK". A sample's turns
// are one conversation, so its turns are not independent pairs; the verdict pairs these means.
std::vector<SampleRecord> mean_over_turns(const std::vector<SampleRecord>& records, int first_turn);

std::string claims_markdown(const std::vector<ClaimRow>& rows);

// Paired differences a - b of `metric` ("score", "recall", "score_ms") between two methods at one
// budget, over the (task, length, depth, seed) both have; sorted by that key. Exposed for tests.
std::vector<double> paired_differences(const std::vector<SampleRecord>& records, const std::string& a,
                                       const std::string& b, int64_t budget, const std::string& metric);

}  // namespace kvslim::eval
