#include "tasks/needle_layout.h"

#include <algorithm>
#include <cmath>

#include "tasks/sizing.h"

namespace kvslim::tasks {

int depth_percent(size_t index) {
  // round(index * 100 / 39); never a tie, since 100 * index / 39 is an integer or has a remainder
  // that is not 39 / 2.
  return int((index * 200 + 39) / 78);
}

std::vector<int> draw_percents(Rng& rng, size_t count) {
  std::vector<size_t> grid(kDepthCount);
  for (size_t i = 0; i < kDepthCount; ++i) grid[i] = i;
  rng.shuffle(grid);
  std::vector<int> percents;
  for (size_t i = 0; i < count; ++i) percents.push_back(depth_percent(grid[i]));
  std::sort(percents.begin(), percents.end());
  return percents;
}

double depth_or_drawn(std::optional<double> depth, Rng& rng) {
  return depth ? *depth : depth_percent(rng.below(kDepthCount)) / 100.0;
}

TaskSample build_needle_sample(const std::string& task, int64_t target_tokens, const NeedleLayout& layout,
                               Haystack& haystack, const Tokenizer& tokenizer) {
  const std::string& sep = haystack.separator();
  // The context for `chars` haystack characters, the depth needle at `depth_boundary` (or at the
  // same fraction of sentence boundaries while the haystack is being sized).
  const auto context_of = [&](int64_t chars, std::optional<int64_t> depth_boundary) {
    const std::vector<std::string_view> sentences = haystack.first_chars(chars);
    const int64_t n = int64_t(sentences.size());
    std::vector<Insertion> insertions;
    for (size_t i = 0; i < layout.needles.size(); ++i) {
      const int64_t boundary = layout.depth ? depth_boundary.value_or(std::llround(*layout.depth * double(n)))
                                            : n * layout.percents[i] / 100;
      insertions.push_back({boundary, layout.needles[i]});
    }
    return layout.intro + join_with_insertions(sentences, insertions, sep) + "\n";
  };
  const std::string tail = layout.question + layout.answer_prefix;
  const Fit fit = fit_units(
      task, [&](int64_t chars) { return context_of(chars, std::nullopt) + tail; }, tokenizer, target_tokens, 0);

  std::optional<int64_t> depth_boundary;
  if (layout.depth) {
    // Tokens before boundary k are those of the context's text up to it; the goal is `depth` of
    // the context's tokens without the needle.
    const std::vector<std::string_view> sentences = haystack.first_chars(fit.units);
    const int64_t n = int64_t(sentences.size());
    const int64_t others = text_tokens(tokenizer, layout.intro + join_with_insertions(sentences, {}, sep) + "\n");
    const auto tokens_before = [&](int64_t k) {
      const std::vector<std::string_view> head(sentences.begin(), sentences.begin() + k);
      return text_tokens(tokenizer, layout.intro + join_with_insertions(head, {}, sep) + (k > 0 ? sep : ""));
    };
    const int64_t goal = std::llround(*layout.depth * double(others));
    depth_boundary = closest_count(tokens_before, 0, n, std::llround(*layout.depth * double(n)), goal, 0);
  }

  TaskSample sample;
  sample.context = context_of(fit.units, depth_boundary);
  sample.question = layout.question;
  sample.answer_prefix = layout.answer_prefix;
  sample.answers = layout.answers;
  sample.depth = layout.depth.value_or(-1);
  sample.max_new_tokens = layout.max_new_tokens;
  if (layout.depth) check_length(task, prompt_tokens(tokenizer, sample.prompt()), target_tokens);
  return sample;
}

}  // namespace kvslim::tasks
