// Passkey retrieval (Mohtashami & Jaggi, "Landmark Attention"): a key hidden in the noise
// haystack, asked for at the end.
#include "tasks/needle_layout.h"
#include "tasks/task_families.h"

namespace kvslim::tasks {

TaskSample make_passkey(int digits, const SampleRequest& request) {
  Rng& rng = request.rng;
  const std::string key = random_digits(rng, digits);
  NeedleLayout layout;
  layout.intro =
      "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz you "
      "about the important information there.\n";
  layout.needles = {"The pass key is " + key + ". Remember it. " + key + " is the pass key."};
  layout.depth = depth_or_drawn(request.depth, rng);
  layout.question = "What is the pass key?";
  layout.answer_prefix = " The pass key is";
  layout.answers = {key};
  // The digits plus room for the words a model may put around them.
  layout.max_new_tokens = digits + 16;
  Haystack haystack = Haystack::noise();
  return build_needle_sample(request.info.name, request.target_tokens, layout, haystack, request.tokenizer);
}

}  // namespace kvslim::tasks
