#include "eval/sample_source.h"

namespace kvslim::eval {

SampleSource generated_source(const GridOptions& grid, const TaskCatalog& catalog, const Tokenizer& tokenizer) {
  SampleSource source;
  source.samples = expand_grid(grid, catalog.find);
  source.make = [catalog, &tokenizer](const SampleSpec& spec) {
    const std::optional<double> depth = spec.depth >= 0 ? std::optional<double>(spec.depth) : std::nullopt;
    return catalog.make(spec.task, spec.length, spec.seed, tokenizer, depth);
  };
  source.score = [catalog](const TaskSample& sample, const std::string& output) {
    return Scores{catalog.score(sample, output), catalog.partial(sample, output)};
  };
  return source;
}

}  // namespace kvslim::eval
