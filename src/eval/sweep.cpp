#include "eval/sweep.h"

#include <filesystem>
#include <set>

#include "util/error.h"

namespace kvslim::eval {

namespace {

std::string samples_path(const std::string& dir) { return (std::filesystem::path(dir) / "samples.jsonl").string(); }

// The key a run will have, known before its sample is generated.
std::string run_key(const SampleSpec& spec, const MethodRun& run, Protocol protocol) {
  SampleRecord r;
  r.method = run.method->label;
  r.budget = run.budget;
  // A multi-turn run writes its turns together: the first one marks it done.
  r.task = protocol == Protocol::MultiTurn ? turn_label(spec.label, 1) : spec.label;
  r.length = spec.length;
  r.depth = spec.depth;
  r.seed = spec.seed;
  r.protocol = protocol_name(protocol);
  return r.key();
}

}  // namespace

SweepOutcome run_sweep(const Model& model, ThreadPool& pool, const SampleSource& source, const SweepOptions& options,
                       const std::function<void(const SweepProgress&)>& on_run) {
  const std::vector<MethodRun> runs = expand_runs(options.methods, options.budgets);
  options.runner.intrinsic.validate(model.config().n_vocab);
  const std::string path = samples_path(options.out_dir);
  RecordWriter writer(path);  // fails now if the directory cannot be written
  std::set<std::string> done;
  for (const SampleRecord& r : read_records(path)) done.insert(r.key());

  // Per sample of this shard, the runs still to do.
  std::vector<std::pair<size_t, std::vector<const MethodRun*>>> work;
  SweepOutcome outcome;
  SweepProgress progress;
  for (size_t i = 0; i < source.samples.size(); ++i) {
    if (!options.shard.takes(i)) continue;
    std::vector<const MethodRun*> todo;
    for (const MethodRun& run : runs) {
      if (done.count(run_key(source.samples[i], run, options.runner.protocol))) {
        ++outcome.skipped;
      } else {
        todo.push_back(&run);
      }
    }
    progress.total += int64_t(todo.size());
    if (!todo.empty()) work.emplace_back(i, std::move(todo));
  }

  for (const auto& [index, todo] : work) {
    const SampleSpec& spec = source.samples[index];
    PreparedSample prepared(spec, source.make(spec), model.tokenizer(), options.runner.protocol);
    for (const MethodRun* run : todo) {
      std::vector<SampleRecord> records;
      if (options.runner.protocol == Protocol::MultiTurn)
        records = run_multi_turn(model, pool, options.runner, prepared, *run, source);
      else
        records.push_back(run_method(model, pool, options.runner, prepared, *run, source));
      for (const SampleRecord& record : records) writer.append(record);
      ++outcome.ran;
      ++progress.done;
      progress.record = &records.back();
      if (on_run) on_run(progress);
    }
  }
  outcome.summary = summarize_directory(options.out_dir);
  return outcome;
}

Summary summarize_directory(const std::string& dir) {
  const Summary summary = summarize(read_records(samples_path(dir)));
  write_summary(summary, dir);
  return summary;
}

Summary merge_directories(const std::string& out_dir, const std::vector<std::string>& inputs) {
  if (inputs.empty()) fail("eval-merge needs at least one input directory");
  const std::string out_path = samples_path(out_dir);
  std::vector<SampleRecord> all = read_records(out_path);
  for (const std::string& dir : inputs) {
    const std::string path = samples_path(dir);
    if (!std::filesystem::exists(path)) fail("{} has no samples.jsonl", dir);
    const std::vector<SampleRecord> records = read_records(path);
    all.insert(all.end(), records.begin(), records.end());
  }
  const std::vector<SampleRecord> merged = without_duplicates(all);
  summarize(merged);  // refuses mixed protocols before anything is written
  const std::string partial = out_path + ".partial";
  std::filesystem::remove(partial);
  {
    RecordWriter writer(partial);
    for (const SampleRecord& r : merged) writer.append(r);
  }
  std::filesystem::rename(partial, out_path);
  return summarize_directory(out_dir);
}

}  // namespace kvslim::eval
