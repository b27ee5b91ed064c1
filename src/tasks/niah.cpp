// The needle-in-a-haystack tasks, as RULER's scripts/data/synthetic/niah.py builds them: needles
// "One of the special magic numbers for KEY is: VALUE." in a noise, varied or needle haystack.
#include <fmt/format.h>

#include <set>

#include "tasks/needle_layout.h"
#include "tasks/sentences.h"
#include "tasks/task_families.h"
#include "tasks/word_lists.h"
#include "util/error.h"

namespace kvslim::tasks {
namespace {

// "a", "a and b", "a, b, and c", as RULER joins its queries.
std::string join_queries(const std::vector<std::string>& keys) {
  if (keys.size() == 1) return keys[0];
  std::string out;
  for (size_t i = 0; i + 1 < keys.size(); ++i) out += (i ? ", " : "") + keys[i];
  return out + ", and " + keys.back();
}

// Draws keys and values never drawn before in this sample, so no two needles share a key and no
// value answers two questions.
class Distinct {
 public:
  explicit Distinct(const NiahSpec& spec) : uuid_keys_(spec.uuid_keys), uuid_values_(spec.uuid_values) {}

  std::string key(Rng& rng) {
    // Rejection gets slow as the word keys run out; half of them is as far as we go.
    if (!uuid_keys_ && keys_.size() >= words::adjectives().size() * words::nouns().size() / 2) {
      fail("niah: the haystack needs more needles than there are distinct word keys; ask for fewer tokens");
    }
    return draw_distinct(keys_, [&] { return uuid_keys_ ? random_uuid(rng) : words::adjective_noun(rng); });
  }
  std::string value(Rng& rng) {
    return draw_distinct(values_, [&] { return uuid_values_ ? random_uuid(rng) : random_digits(rng, 7); });
  }

 private:
  bool uuid_keys_, uuid_values_;
  std::set<std::string> keys_, values_;
};

}  // namespace

TaskSample make_niah(const NiahSpec& spec, const SampleRequest& request) {
  Rng& rng = request.rng;
  const std::string kinds = spec.uuid_values ? "uuids" : "numbers";
  const std::string kind = spec.uuid_values ? "uuid" : "number";

  Distinct distinct(spec);
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> values;
  std::vector<std::string> needles;
  for (int k = 0; k < spec.keys; ++k) {
    keys.push_back(distinct.key(rng));
    values.emplace_back();
    for (int v = 0; v < spec.values; ++v) {
      values.back().push_back(distinct.value(rng));
      needles.push_back(sentences::niah_needle(kinds, keys.back(), values.back().back()));
    }
  }
  rng.shuffle(needles);
  std::vector<size_t> asked(keys.size());
  for (size_t i = 0; i < asked.size(); ++i) asked[i] = i;
  rng.shuffle(asked);
  asked.resize(size_t(spec.queries));

  NeedleLayout layout;
  std::vector<std::string> queried;
  for (const size_t k : asked) {
    queried.push_back(keys[k]);
    for (const std::string& value : values[k]) layout.answers.push_back(value);
  }
  const std::string query = join_queries(queried);
  // RULER's template, in the singular when one value is asked for.
  if (layout.answers.size() == 1) {
    layout.intro = sentences::niah_intro_one(kind);
    layout.question = sentences::niah_question_one(kind, query);
    layout.answer_prefix = sentences::niah_answer_prefix_one(kind, query);
  } else {
    layout.intro = sentences::niah_intro_many(kinds);
    layout.question =
        fmt::format("What are all the special magic {} for {} mentioned in the provided text?", kinds, query);
    layout.answer_prefix = fmt::format(" The special magic {} for {} mentioned in the provided text are", kinds, query);
  }
  layout.max_new_tokens = int(layout.answers.size()) * (spec.uuid_values ? 48 : 16);
  layout.needles = needles;
  if (request.info.takes_depth) {
    layout.depth = depth_or_drawn(request.depth, rng);
  } else {
    layout.percents = draw_percents(rng, needles.size());
  }

  const uint64_t haystack_seed = rng.next();
  Haystack haystack = [&] {
    switch (spec.haystack) {
      case HaystackKind::Noise: return Haystack::noise();
      case HaystackKind::Varied: return Haystack::varied(haystack_seed);
      case HaystackKind::Needles: break;
    }
    // Distractor needles, each with a key of its own, one per line as in RULER.
    return Haystack(
        [kinds, distinct](Rng& r, size_t) mutable {
          return sentences::niah_needle(kinds, distinct.key(r), distinct.value(r));
        },
        haystack_seed, "\n");
  }();
  TaskSample sample =
      build_needle_sample(request.info.name, request.target_tokens, layout, haystack, request.tokenizer);
  // The multi-turn form: one key per turn, RULER's singular template.
  if (asked.size() > 1)
    for (const size_t k : asked) {
      TaskTurn turn;
      const std::string one = values[k].size() == 1 ? kind : kinds;
      turn.question = fmt::format("\nWhat {} the special magic {} for {} mentioned in the provided text?",
                                  values[k].size() == 1 ? "is" : "are all", one, keys[k]);
      turn.answer_prefix = fmt::format(" The special magic {} for {} mentioned in the provided text {}", one, keys[k],
                                       values[k].size() == 1 ? "is" : "are");
      turn.answers = values[k];
      turn.max_new_tokens = int(values[k].size()) * (spec.uuid_values ? 48 : 16);
      sample.turns.push_back(std::move(turn));
    }
  return sample;
}

}  // namespace kvslim::tasks
