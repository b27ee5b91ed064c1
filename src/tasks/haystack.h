// Haystacks: endless, deterministic streams of sentences that a task cuts to the length its
// prompt needs (to the character, so any tokenizer can be fitted within a token or two), with
// needle sentences inserted between the haystack's sentences.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tasks/rng.h"

namespace kvslim::tasks {

class Haystack {
 public:
  // Makes sentence number `index` of the stream, drawing from `rng` if it needs randomness.
  using SentenceMaker = std::function<std::string(Rng& rng, size_t index)>;

  Haystack(SentenceMaker make, uint64_t seed, std::string separator);

  // RULER's noise haystack: "The grass is green. The sky is blue. The sun is yellow. Here we go.
  // There and back again." repeated, one sentence at a time.
  static Haystack noise();
  // Grammatical sentences built from our word lists, every one drawn afresh (stands in for the
  // Paul Graham essays RULER uses, which cannot be downloaded here).
  static Haystack varied(uint64_t seed);

  // The first `chars` characters of the stream (its sentences joined by the separator) as
  // sentences; the last one is cut short when `chars` ends inside it. The views stay valid for
  // the haystack's lifetime.
  std::vector<std::string_view> first_chars(int64_t chars);

  const std::string& separator() const { return separator_; }

 private:
  SentenceMaker make_;
  Rng rng_;
  std::string separator_;
  std::deque<std::string> sentences_;  // a deque: growing it never moves the sentences handed out
  std::vector<int64_t> starts_;        // offset of each sentence in the stream
};

// A sentence to insert before haystack sentence `boundary` (boundary == sentence count: after the
// last one).
struct Insertion {
  int64_t boundary;
  std::string_view text;
};

// The sentences joined by `separator`, each insertion placed at its boundary (insertions must be
// sorted by boundary; those at the same boundary keep their order).
std::string join_with_insertions(const std::vector<std::string_view>& sentences,
                                 const std::vector<Insertion>& insertions, const std::string& separator);

}  // namespace kvslim::tasks
