// The aggregation tasks of RULER: common words extraction (common_words_extraction.py) and
// frequent coded words extraction (freq_words_extraction.py). Their "haystack" is the word list
// itself, sized by its number of items.
#include <fmt/format.h>

#include <cmath>
#include <set>

#include "tasks/sizing.h"
#include "tasks/task_families.h"
#include "tasks/word_lists.h"

namespace kvslim::tasks {
namespace {

// Distinct words for the common-words list: our single words in an order drawn by the seed,
// then as many distinct "adjective-noun" pairs as a long list needs. Grown on demand, always in
// the same order, so the first n words do not depend on how often the list was asked for.
class WordPool {
 public:
  explicit WordPool(uint64_t seed) : rng_(seed) {
    for (const auto* list : {&words::adjectives(), &words::nouns(), &words::verbs_past()}) {
      words_.insert(words_.end(), list->begin(), list->end());
    }
    rng_.shuffle(words_);
    used_.insert(words_.begin(), words_.end());
  }

  const std::string& operator[](size_t i) {
    while (words_.size() <= i) {
      std::string pair = words::adjective_noun(rng_);
      if (used_.insert(pair).second) words_.push_back(std::move(pair));
    }
    return words_[i];
  }

 private:
  Rng rng_;
  std::vector<std::string> words_;
  std::set<std::string> used_;
};

// RULER's frequencies: below 4096 tokens each common word appears 6 times and each other word
// once; from there 30 and 3 times. We switch on the list's length instead (800 items is about
// 4096 tokens of a Llama-style tokenizer), so a list never has fewer items than its common
// words need whatever the tokenizer.
struct CommonWordCounts {
  int64_t common, rare;
};
CommonWordCounts common_word_counts(int64_t items) {
  return items >= 800 ? CommonWordCounts{30, 3} : CommonWordCounts{6, 1};
}

constexpr int kCommonWords = 10;
constexpr int64_t kMinCommonItems = 70;  // the 60 items of the common words and at least 10 others

// zeta(2) = pi^2 / 6, the normaliser of the Zipf distribution with alpha = 2.
constexpr double kZeta2 = 1.6449340668482264;
// From 70 words on, rank 3's count floor(70 / 9 / zeta(2)) = 4 exceeds rank 4's = 2, so the
// three most frequent coded words are unambiguous.
constexpr int64_t kMinCodedWords = 70;

}  // namespace

TaskSample make_common_words(const SampleRequest& request) {
  Rng& rng = request.rng;
  WordPool pool(rng.next());
  const uint64_t order_seed = rng.next();
  const std::string intro =
      "Below is a numbered list of words. In these words, some appear more often than others. Memorize the ones that "
      "appear most often.\n";
  TaskSample sample;
  sample.question = fmt::format("Question: What are the {} most common words in the above list?", kCommonWords);
  sample.answer_prefix = fmt::format(" Answer: The top {} words that appear most often in the list are:", kCommonWords);

  const auto context_of = [&](int64_t items) {
    const CommonWordCounts counts = common_word_counts(items);
    std::vector<size_t> list;
    for (int w = 0; w < kCommonWords; ++w) list.insert(list.end(), size_t(counts.common), size_t(w));
    for (size_t w = kCommonWords; int64_t(list.size()) < items; ++w) {
      list.insert(list.end(), size_t(std::min<int64_t>(counts.rare, items - int64_t(list.size()))), w);
    }
    Rng order(order_seed);
    order.shuffle(list);
    std::string context = intro;
    for (size_t i = 0; i < list.size(); ++i) context += fmt::format("{}{}. {}", i ? " " : "", i + 1, pool[list[i]]);
    return context + "\n";
  };
  const std::string tail = sample.question + sample.answer_prefix;
  const Fit fit = fit_units(
      request.info.name, [&](int64_t items) { return context_of(items) + tail; }, request.tokenizer,
      request.target_tokens, kMinCommonItems);
  sample.context = context_of(fit.units);
  for (int w = 0; w < kCommonWords; ++w) sample.answers.push_back(pool[size_t(w)]);
  sample.max_new_tokens = 120;
  return sample;
}

TaskSample make_frequent_words(const SampleRequest& request) {
  Rng& rng = request.rng;
  // RULER's vocabulary: target / 50 random 6-letter words; the top-ranked one is replaced by
  // "..." as noise the question says to ignore.
  const size_t vocab_size = size_t(std::max<int64_t>(request.target_tokens / 50, 8));
  std::vector<std::string> vocab = {"..."};
  std::set<std::string> used;
  while (vocab.size() < vocab_size) {
    std::string word(6, 'a');
    for (char& c : word) c = char('a' + rng.below(26));
    if (used.insert(word).second) vocab.push_back(word);
  }
  const uint64_t order_seed = rng.next();
  const std::string intro =
      "Read the following coded text and track the frequency of each coded word. Find the three most frequently "
      "appeared coded words. ";
  TaskSample sample;
  sample.question =
      "Question: Do not provide any explanation. Please ignore the dots '....'. What are the three most frequently "
      "appeared words in the above coded text?";
  sample.answer_prefix = " Answer: According to the coded text above, the three most frequently appeared words are:";

  // `words` words: rank k >= 2 appears floor(words * k^-2 / zeta(2)) times and "..." takes the
  // rest, so every extra word is one more item of text.
  const auto context_of = [&](int64_t words) {
    std::vector<size_t> text;
    for (size_t k = 2; k <= vocab.size(); ++k) {
      const auto count = int64_t(std::floor(double(words) / (double(k * k) * kZeta2)));
      text.insert(text.end(), size_t(count), k - 1);
    }
    text.insert(text.end(), size_t(words - int64_t(text.size())), 0);
    Rng order(order_seed);
    order.shuffle(text);
    std::string context = intro;
    for (size_t i = 0; i < text.size(); ++i) (context += i ? " " : "") += vocab[text[i]];
    return context + "\n";
  };
  const std::string tail = sample.question + sample.answer_prefix;
  const Fit fit = fit_units(
      request.info.name, [&](int64_t words) { return context_of(words) + tail; }, request.tokenizer,
      request.target_tokens, kMinCodedWords);
  sample.context = context_of(fit.units);
  sample.answers = {vocab[1], vocab[2], vocab[3]};
  sample.max_new_tokens = 50;
  return sample;
}

}  // namespace kvslim::tasks
