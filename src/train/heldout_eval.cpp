#include "train/heldout_eval.h"

#include "engine/generate.h"
#include "engine/session.h"
#include "tasks/task.h"
#include "train/data_stream.h"
#include "util/error.h"

namespace kvslim::train {

std::vector<EvalScore> evaluate_heldout(const Model& model, const EvalSpec& spec, ThreadPool& pool) {
  if (spec.samples < 1 || uint64_t(spec.samples) > kFirstTrainingSeed)
    fail("held-out samples per task must be in [1, {}], got {}", kFirstTrainingSeed, spec.samples);
  const Tokenizer& tokenizer = model.tokenizer();
  std::vector<EvalScore> scores;
  for (const std::string& task : spec.tasks)
    for (const int64_t length : spec.lengths) {
      EvalScore s{task, length, 0.0, spec.samples};
      for (int i = 0; i < spec.samples; ++i) {
        const tasks::TaskSample sample = tasks::make_sample(task, length, uint64_t(i), tokenizer);
        GenerateRequest request;
        request.prompt = tokenizer.encode(sample.prompt(), tokenizer.add_bos_by_default(), false);
        request.n_predict = sample.max_new_tokens;
        request.sampling.temperature = 0;  // greedy
        EngineOptions options;
        options.context = int(request.prompt.size()) + request.n_predict;
        s.score += tasks::score_output(sample, generate(model, pool, options, request).text);
      }
      s.score /= spec.samples;
      scores.push_back(s);
    }
  return scores;
}

}  // namespace kvslim::train
