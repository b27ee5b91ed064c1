#include "tasks/haystack.h"

#include <algorithm>

#include "tasks/word_lists.h"
#include "util/error.h"

namespace kvslim::tasks {
namespace {

std::string capitalised(std::string text) {
  if (!text.empty() && text[0] >= 'a' && text[0] <= 'z') text[0] = char(text[0] - 'a' + 'A');
  return text;
}

// "a" or "an" before a word of our lists (none starts with a silent "h" or a "you" sound).
std::string with_article(const std::string& word) {
  const bool vowel = std::string_view("aeiou").find(word[0]) != std::string_view::npos;
  return (vowel ? "an " : "a ") + word;
}

// One varied sentence: a template drawn by the seed with every slot drawn from the word lists.
std::string varied_sentence(Rng& rng) {
  using namespace words;
  const auto adj = [&] { return rng.pick(adjectives()); };
  const auto noun = [&] { return rng.pick(nouns()); };
  const auto verb = [&] { return rng.pick(verbs_past()); };
  const auto place = [&] { return rng.pick(places()); };
  const auto name = [&] { return rng.pick(names()); };
  switch (rng.below(10)) {
    case 0:
      return "The " + adj() + " " + noun() + " " + verb() + " the " + noun() + " " + rng.pick(prepositions()) +
             " the " + place() + ".";
    case 1: return name() + " " + verb() + " " + with_article(adj()) + " " + noun() + " " + rng.pick(times()) + ".";
    case 2: return capitalised(rng.pick(times())) + ", " + name() + " " + verb() + " the " + adj() + " " + noun() + ".";
    case 3:
      return "In the " + place() + ", " + with_article(adj()) + " " + noun() + " " + verb() + " the " + noun() + ".";
    case 4:
      return name() + " and " + name() + " " + verb() + " the " + noun() + " " + rng.pick(prepositions()) + " the " +
             adj() + " " + place() + ".";
    case 5: return "Nobody knew why the " + noun() + " in the " + place() + " was so " + adj() + ".";
    case 6:
      return "The " + noun() + " " + rng.pick(prepositions()) + " the " + place() + " looked " + rng.pick(degrees()) +
             " " + adj() + ".";
    case 7:
      return "When the " + noun() + " " + verb() + " the " + noun() + ", " + name() + " " + verb() + " " +
             with_article(noun()) + ".";
    case 8: return name() + " said that the " + adj() + " " + noun() + " had " + verb() + " the " + noun() + ".";
    default: return "Every " + noun() + " in the " + place() + " seemed " + adj() + " and " + adj() + ".";
  }
}

}  // namespace

Haystack::Haystack(SentenceMaker make, uint64_t seed, std::string separator)
    : make_(std::move(make)), rng_(seed), separator_(std::move(separator)) {}

Haystack Haystack::noise() {
  static const char* const kNoise[] = {"The grass is green.", "The sky is blue.", "The sun is yellow.", "Here we go.",
                                       "There and back again."};
  return Haystack([](Rng&, size_t index) { return std::string(kNoise[index % 5]); }, 0, " ");
}

Haystack Haystack::varied(uint64_t seed) {
  return Haystack([](Rng& rng, size_t) { return varied_sentence(rng); }, seed, " ");
}

std::vector<std::string_view> Haystack::first_chars(int64_t chars) {
  if (chars < 0) fail("haystack: negative length {}", chars);
  const int64_t sep = int64_t(separator_.size());
  // Grow the stream until a sentence starts at or beyond `chars`.
  while (starts_.empty() || starts_.back() + int64_t(sentences_.back().size()) + sep < chars) {
    const int64_t start = starts_.empty() ? 0 : starts_.back() + int64_t(sentences_.back().size()) + sep;
    sentences_.push_back(make_(rng_, sentences_.size()));
    starts_.push_back(start);
  }
  std::vector<std::string_view> out;
  for (size_t i = 0; i < sentences_.size() && starts_[i] < chars; ++i) {
    const std::string_view sentence = sentences_[i];
    out.push_back(sentence.substr(0, size_t(std::min<int64_t>(int64_t(sentence.size()), chars - starts_[i]))));
  }
  return out;
}

std::string join_with_insertions(const std::vector<std::string_view>& sentences,
                                 const std::vector<Insertion>& insertions, const std::string& separator) {
  std::string out;
  size_t next = 0;
  const auto append = [&](std::string_view piece) {
    if (!out.empty()) out += separator;
    out += piece;
  };
  for (size_t i = 0; i <= sentences.size(); ++i) {
    for (; next < insertions.size() && insertions[next].boundary <= int64_t(i); ++next) append(insertions[next].text);
    if (i < sentences.size()) append(sentences[i]);
  }
  return out;
}

}  // namespace kvslim::tasks
