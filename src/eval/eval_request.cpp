#include "eval/eval_request.h"

#include "model/model.h"
#include "util/error.h"

namespace kvslim::eval {

PreparedEval prepare_eval(const EvalRequest& r, const std::function<void(const std::string&)>& warn) {
  PreparedEval p;
  SweepOptions& sweep = p.sweep;
  sweep.methods = parse_methods(r.methods);
  sweep.budgets = r.budgets;
  expand_runs(sweep.methods, sweep.budgets);
  const MetricSet metrics = parse_metrics(r.metrics);
  sweep.runner.protocol = protocol_from_name(r.protocol);
  if (sweep.runner.protocol == Protocol::MultiTurn && (metrics.recall || metrics.attn_error || metrics.kl))
    fail("--protocol multi-turn scores answers only: drop --metrics recall/attn_error/kl");
  sweep.shard = parse_shard(r.shard);
  sweep.out_dir = r.out;
  sweep.runner.engine.batch = r.batch;
  sweep.runner.engine.page_tokens = r.kv_page;
  sweep.runner.engine.cache_type_k = r.cache_type_k;
  sweep.runner.engine.cache_type_v = r.cache_type_v;
  sweep.runner.engine.validate();
  IntrinsicOptions& intrinsic = sweep.runner.intrinsic;
  intrinsic.recall = metrics.recall;
  intrinsic.attn_error = metrics.attn_error;
  intrinsic.kl = metrics.kl;
  intrinsic.response_tokens = r.response_tokens;
  p.continuation = r.continuation;
  if (r.data.empty()) {
    p.grid = r.grid;
    expand_grid(p.grid, generated_tasks().find);  // checks it
  } else {
    if (!r.grid.tasks.empty() || !r.grid.lengths.empty() || !r.grid.depths.empty())
      fail("--data replaces --tasks, --lengths and --depths: give one or the other");
    LongBenchData data = read_longbench_file(r.data);
    if (warn)
      for (const std::string& error : data.errors) warn(r.data + " " + error + " (skipped)");
    p.longbench = longbench_source(std::move(data.samples));
  }
  return p;
}

SweepOutcome run_eval(const Model& model, ThreadPool& pool, const PreparedEval& prepared,
                      const std::function<void(const SweepProgress&)>& on_run) {
  SweepOptions sweep = prepared.sweep;
  if (!prepared.continuation.empty()) {
    sweep.runner.intrinsic.continuation = model.tokenizer().encode(prepared.continuation, false, false);
    if (sweep.runner.intrinsic.continuation.empty()) fail("--continuation '{}' has no tokens", prepared.continuation);
  }
  static const TaskCatalog catalog = generated_tasks();
  const SampleSource source =
      prepared.longbench ? *prepared.longbench : generated_source(prepared.grid, catalog, model.tokenizer());
  return run_sweep(model, pool, source, sweep, on_run);
}

}  // namespace kvslim::eval
