#include "train/dense_tasks.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "tasks/haystack.h"
#include "tasks/rng.h"
#include "tasks/sentences.h"
#include "tasks/word_lists.h"
#include "util/error.h"

namespace kvslim::train {
namespace {

// One question of a sequence: the text that asks it (question + answer prefix, as the
// evaluation prompt ends) and the answer the loss is on.
struct Question {
  std::string asked, answer;
};

// A dense sample before sizing: the haystack, the needles at their fractions of it (sorted),
// and the questions asked after it.
struct DenseLayout {
  std::string intro;
  tasks::Haystack haystack = tasks::Haystack::noise();
  std::vector<double> fractions;
  std::vector<std::string> needles;
  std::vector<Question> questions;
};

// `count` fractions of the haystack, uniform and sorted.
std::vector<double> sorted_fractions(tasks::Rng& rng, size_t count) {
  std::vector<double> out(count);
  for (double& f : out) f = double(rng.next() >> 11) * 0x1.0p-53;
  std::sort(out.begin(), out.end());
  return out;
}

// UUID values always (recall_uuids), or in 2 sequences of 5 (recall).
DenseLayout recall_layout(tasks::Rng& rng, int64_t length, bool uuids_only) {
  const bool uuids = uuids_only || rng.below(5) < 2;
  const std::string kind = uuids ? "uuid" : "number", kinds = kind + "s";
  const size_t needles = size_t(std::clamp<int64_t>(length / 160, 3, 24));
  const size_t asked = std::max<size_t>(2, needles / 2);

  DenseLayout layout;
  layout.intro = tasks::sentences::niah_intro_many(kinds);
  layout.haystack = rng.below(10) < 7 ? tasks::Haystack::varied(rng.next()) : tasks::Haystack::noise();
  std::set<std::string> keys_used, values_used;
  std::vector<std::pair<std::string, std::string>> pairs;
  for (size_t i = 0; i < needles; ++i) {
    const std::string key = tasks::draw_distinct(keys_used, [&] { return tasks::words::adjective_noun(rng); });
    const std::string value = tasks::draw_distinct(
        values_used, [&] { return uuids ? tasks::random_uuid(rng) : tasks::random_digits(rng, 7); });
    pairs.emplace_back(key, value);
    layout.needles.push_back(tasks::sentences::niah_needle(kinds, key, value));
  }
  layout.fractions = sorted_fractions(rng, needles);  // the needles are in random key order already
  std::vector<size_t> order(needles);
  for (size_t i = 0; i < needles; ++i) order[i] = i;
  rng.shuffle(order);
  for (size_t i = 0; i < asked; ++i) {
    const auto& [key, value] = pairs[order[i]];
    layout.questions.push_back(
        {tasks::sentences::niah_question_one(kind, key) + tasks::sentences::niah_answer_prefix_one(kind, key), value});
  }
  return layout;
}

DenseLayout chains_layout(tasks::Rng& rng, int64_t length) {
  constexpr int kHops = 4;
  const size_t chains = size_t(std::clamp<int64_t>(length / 400, 1, 4));

  DenseLayout layout;
  layout.intro = tasks::sentences::vt_intro();
  std::set<std::string> names_used, values_used;
  std::vector<std::vector<std::string>> names(chains);
  std::vector<std::string> values;
  for (size_t c = 0; c < chains; ++c) {
    values.push_back(tasks::draw_distinct(values_used, [&] { return tasks::random_digits(rng, 5); }));
    for (int i = 0; i <= kHops; ++i) {
      names[c].push_back(tasks::draw_distinct(names_used, [&] { return tasks::random_letters(rng, 5); }));
    }
  }
  // Interleave the chains: a shuffled run of chain labels, each chain's k-th label its hop k, so
  // every chain keeps its order.
  std::vector<size_t> labels;
  for (size_t c = 0; c < chains; ++c) labels.insert(labels.end(), kHops + 1, c);
  rng.shuffle(labels);
  std::vector<int> next_hop(chains, 0);
  for (const size_t c : labels) {
    const int hop = next_hop[c]++;
    const std::vector<std::string>& chain = names[c];
    using namespace tasks::sentences;
    layout.needles.push_back(hop == 0 ? vt_assign_value(chain[0], values[c])
                                      : vt_assign_variable(chain[size_t(hop)], chain[size_t(hop - 1)]));
  }
  layout.fractions = sorted_fractions(rng, layout.needles.size());
  std::vector<size_t> order(chains);
  for (size_t c = 0; c < chains; ++c) order[c] = c;
  rng.shuffle(order);
  for (const size_t c : order) {
    std::string answer;
    for (const std::string& name : names[c]) answer += (answer.empty() ? "" : ", ") + name;
    layout.questions.push_back(
        {tasks::sentences::vt_question(values[c]) + tasks::sentences::vt_answer_prefix(kHops + 1, values[c]), answer});
  }
  return layout;
}

DenseLayout make_layout(const std::string& task, uint64_t seed, int64_t length) {
  if (length < kDenseMinTokens) fail("{} sequences need at least {} tokens, not {}", task, kDenseMinTokens, length);
  tasks::Rng rng(seed);
  if (task == kRecallTask) return recall_layout(rng, length, false);
  if (task == kRecallUuidsTask) return recall_layout(rng, length, true);
  if (task == kChainsTask) return chains_layout(rng, length);
  fail("'{}' is not a dense training task ({}, {} or {})", task, kRecallTask, kRecallUuidsTask, kChainsTask);
}

// The text pieces of the layout with `chars` haystack characters; odd pieces are answers. The
// first piece is the context and first question, as an evaluation prompt; each later question
// follows the previous answer after ".\n".
std::vector<std::string> pieces(DenseLayout& layout, int64_t chars) {
  const std::vector<std::string_view> sentences = layout.haystack.first_chars(chars);
  const int64_t n = int64_t(sentences.size());
  std::vector<tasks::Insertion> insertions;
  for (size_t i = 0; i < layout.needles.size(); ++i)
    insertions.push_back({std::min(n, int64_t(layout.fractions[i] * double(n + 1))), layout.needles[i]});
  std::string context = layout.intro + tasks::join_with_insertions(sentences, insertions, layout.haystack.separator());
  context += "\n";
  std::vector<std::string> out;
  for (size_t q = 0; q < layout.questions.size(); ++q) {
    const Question& question = layout.questions[q];
    out.push_back((q == 0 ? context : std::string(".\n")) + question.asked);
    const bool space_before = !std::isspace(static_cast<unsigned char>(question.asked.back()));
    out.push_back((space_before ? " " : "") + question.answer);
  }
  return out;
}

TrainSequence assemble(const std::vector<std::string>& parts, const Tokenizer& tokenizer, float prompt_weight) {
  TrainSequence seq;
  for (size_t i = 0; i < parts.size(); ++i) {
    const bool answer = i % 2 == 1;
    const std::vector<int32_t> ids = tokenizer.encode(parts[i], i == 0 && tokenizer.add_bos_by_default(), false);
    seq.tokens.insert(seq.tokens.end(), ids.begin(), ids.end());
    seq.weights.insert(seq.weights.end(), ids.size(), answer ? 1.0f : prompt_weight);
  }
  seq.tokens.push_back(tokenizer.eos_id());
  seq.weights.push_back(1.0f);
  seq.weights[0] = 0;  // nothing predicts the first token
  return seq;
}

int64_t text_tokens(const TrainSequence& seq) { return int64_t(seq.tokens.size()) - 1; }  // without the EOS

// The haystack length (in characters) that brings the sequence to at most `length` tokens, as
// close to it as a few measurements get. Questions are dropped (keeping one) when even an empty
// haystack does not fit.
int64_t fit_haystack(DenseLayout& layout, int64_t length, const Tokenizer& tokenizer) {
  const auto tokens_at = [&](int64_t chars) { return text_tokens(assemble(pieces(layout, chars), tokenizer, 0)); };
  int64_t fixed = tokens_at(0);
  while (fixed > length && layout.questions.size() > 1) {
    layout.questions.pop_back();
    fixed = tokens_at(0);
  }
  if (fixed > length)
    fail("a dense training sequence needs {} tokens without its haystack; {} is too short", fixed, length);
  const int64_t probe = 2 * length;
  const double chars_per_token = double(probe) / double(std::max<int64_t>(1, tokens_at(probe) - fixed));
  int64_t chars = int64_t(double(length - fixed) * chars_per_token * 0.98);
  while (chars > 0 && tokens_at(chars) > length) chars = chars * 95 / 100;
  return chars;
}

}  // namespace

bool is_dense_task(const std::string& task) {
  return task == kRecallTask || task == kRecallUuidsTask || task == kChainsTask;
}

TrainSequence dense_sequence(const std::string& task, uint64_t seed, int64_t length, const Tokenizer& tokenizer,
                             float prompt_weight) {
  if (tokenizer.eos_id() < 0) fail("the tokenizer has no end-of-sequence token to end training answers with");
  DenseLayout layout = make_layout(task, seed, length);
  const int64_t chars = fit_haystack(layout, length, tokenizer);
  return assemble(pieces(layout, chars), tokenizer, prompt_weight);
}

std::string dense_text(const std::string& task, uint64_t seed, int64_t length, const Tokenizer& tokenizer) {
  DenseLayout layout = make_layout(task, seed, length);
  std::string text;
  for (const std::string& part : pieces(layout, fit_haystack(layout, length, tokenizer))) text += part;
  return text;
}

}  // namespace kvslim::train
