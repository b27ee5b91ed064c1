#include "eval/sample_source.h"

#include <map>
#include <memory>

#include "util/error.h"

namespace kvslim::eval {

TaskCatalog generated_tasks() {
  return {tasks::find_task, tasks::make_sample, tasks::score_output, tasks::partial_score};
}

SampleSource generated_source(const GridOptions& grid, const TaskCatalog& catalog, const Tokenizer& tokenizer) {
  SampleSource source;
  source.samples = expand_grid(grid, catalog.find);
  source.make = [catalog, &tokenizer](const SampleSpec& spec) {
    const std::optional<double> depth = spec.depth >= 0 ? std::optional<double>(spec.depth) : std::nullopt;
    return catalog.make(spec.task, spec.length, spec.seed, tokenizer, depth);
  };
  source.score = [catalog](const tasks::TaskSample& sample, const std::string& output) {
    return Scores{catalog.score(sample, output), catalog.partial(sample, output)};
  };
  return source;
}

SampleSource longbench_source(std::vector<LongBenchSample> samples) {
  if (samples.empty()) fail("--data has no sample to run");
  auto by_line = std::make_shared<std::map<uint64_t, LongBenchSample>>();
  SampleSource source;
  for (LongBenchSample& sample : samples) {
    SampleSpec spec;
    spec.task = spec.label = sample.dataset;
    spec.length = sample.length < 4000 ? 0 : sample.length < 8000 ? 4000 : 8000;
    spec.seed = uint64_t(sample.line);
    source.samples.push_back(spec);
    (*by_line)[spec.seed] = std::move(sample);
  }
  source.make = [by_line](const SampleSpec& spec) {
    const LongBenchSample& sample = by_line->at(spec.seed);
    const LongBenchPrompt prompt = longbench_prompt(sample);
    tasks::TaskSample task;
    task.task = sample.dataset;
    task.target_tokens = spec.length;
    task.seed = spec.seed;
    task.context = prompt.context;
    task.question = prompt.question;
    task.answers = sample.answers;
    task.max_new_tokens = longbench_dataset(sample.dataset).max_new_tokens;
    return task;
  };
  source.score = [by_line](const tasks::TaskSample& task, const std::string& output) {
    const double score = longbench_score(by_line->at(task.seed), output);
    return Scores{score, score};
  };
  return source;
}

}  // namespace kvslim::eval
