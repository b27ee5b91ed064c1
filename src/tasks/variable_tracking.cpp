// Variable tracking, as RULER's scripts/data/synthetic/variable_tracking.py (noise haystack, one
// chain): "VAR A = 12345." then "VAR B = VAR A." and so on for 4 hops, scattered through the
// haystack in order; every variable of the chain holds the value.
#include <set>

#include "tasks/needle_layout.h"
#include "tasks/sentences.h"
#include "tasks/task_families.h"

namespace kvslim::tasks {

TaskSample make_variable_tracking(const SampleRequest& request) {
  constexpr int kHops = 4;
  Rng& rng = request.rng;
  std::vector<std::string> names;
  std::set<std::string> used;
  while (names.size() < kHops + 1) names.push_back(draw_distinct(used, [&] { return random_letters(rng, 5); }));
  const std::string value = random_digits(rng, 5);

  NeedleLayout layout;
  layout.needles.push_back(sentences::vt_assign_value(names[0], value));
  for (int hop = 1; hop <= kHops; ++hop)
    layout.needles.push_back(sentences::vt_assign_variable(names[hop], names[hop - 1]));
  layout.percents = draw_percents(rng, layout.needles.size());  // sorted, so the chain stays in order
  layout.intro = sentences::vt_intro();
  layout.question = sentences::vt_question(value);
  layout.answer_prefix = sentences::vt_answer_prefix(kHops + 1, value);
  layout.answers = names;
  layout.max_new_tokens = 48;
  Haystack haystack = Haystack::noise();
  return build_needle_sample(request.info.name, request.target_tokens, layout, haystack, request.tokenizer);
}

}  // namespace kvslim::tasks
