#include "tokenizer/bpe_trainer.h"

#include <algorithm>
#include <vector>

#include "tokenizer/byte_unicode.h"
#include "util/error.h"

namespace kvslim::tok {

namespace {

constexpr int32_t kSpecialTokens = 2;  // BOS, EOS

uint64_t pair_key(int32_t left, int32_t right) {
  return (uint64_t{static_cast<uint32_t>(left)} << 32) | static_cast<uint32_t>(right);
}
int32_t key_left(uint64_t key) { return static_cast<int32_t>(key >> 32); }
int32_t key_right(uint64_t key) { return static_cast<int32_t>(key & 0xFFFFFFFFu); }

// A distinct piece of the training text as its current tokens, with its number of occurrences.
struct Word {
  std::vector<int32_t> symbols;
  int64_t count;
};

// The merge loop's state: tokens so far, the words' current spellings, how often each mergeable
// adjacent pair occurs, and which words may contain it.
class Merger {
  // A queued pair. Invariant: every pair with a positive count has an entry whose count is at
  // least the current one (increases push a fresh entry, decreases are fixed when popped), so an
  // entry popped with an up-to-date count is the best pair.
  struct Entry {
    int64_t count;
    int32_t left;
    int32_t right;
  };

  // Heap order: higher counts first, then the lexicographically smaller pair.
  struct LowerPriority {
    const std::vector<std::string>* tokens;
    bool operator()(const Entry& a, const Entry& b) const {
      if (a.count != b.count) return a.count < b.count;
      if (a.left != b.left) return (*tokens)[a.left] > (*tokens)[b.left];
      return (*tokens)[a.right] > (*tokens)[b.right];
    }
  };
  LowerPriority lower_priority() const { return {&tokens_}; }

 public:
  Merger(const BpeTrainer::WordCounts& counts, bool allow_digit_merges) {
    for (int b = 0; b < 256; ++b) {
      const char byte = static_cast<char>(b);
      std::string spelling;
      append_byte_level(spelling, std::string_view(&byte, 1));
      add_token(spelling, allow_digit_merges || b < '0' || b > '9');
    }
    // Sorted so that the processing order never depends on the hash map's iteration order.
    std::vector<std::pair<std::string_view, int64_t>> sorted(counts.begin(), counts.end());
    std::sort(sorted.begin(), sorted.end());
    words_.reserve(sorted.size());
    for (const auto& [text, count] : sorted) {
      Word& word = words_.emplace_back(Word{{}, count});
      for (const char c : text) word.symbols.push_back(static_cast<unsigned char>(c));
      const auto index = static_cast<uint32_t>(words_.size() - 1);
      for_each_pair(word, [&](uint64_t key) {
        counts_[key] += count;
        where_[key].push_back(index);
      });
    }
    for (const auto& [key, count] : counts_) heap_.push_back({count, key_left(key), key_right(key)});
    std::make_heap(heap_.begin(), heap_.end(), lower_priority());
  }

  int32_t n_tokens() const { return static_cast<int32_t>(tokens_.size()); }
  const std::vector<std::string>& tokens() const { return tokens_; }
  const std::vector<std::string>& merges() const { return merges_; }

  // Merges the best pair everywhere; false when no mergeable pair is left.
  bool merge_best() {
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), lower_priority());
      const Entry top = heap_.back();
      heap_.pop_back();
      const auto it = counts_.find(pair_key(top.left, top.right));
      const int64_t current = it == counts_.end() ? 0 : it->second;
      if (current == top.count) {
        merge(top.left, top.right);
        return true;
      }
      // A stale entry: the pair's count fell since it was queued. Requeue it at its count.
      if (current > 0) push({current, top.left, top.right});
    }
    return false;
  }

 private:
  void push(const Entry& entry) {
    heap_.push_back(entry);
    std::push_heap(heap_.begin(), heap_.end(), lower_priority());
  }

  int32_t add_token(const std::string& spelling, bool mergeable) {
    const auto [it, inserted] = ids_.try_emplace(spelling, n_tokens());
    if (inserted) {
      tokens_.push_back(spelling);
      mergeable_.push_back(mergeable);
    }
    return it->second;
  }

  template <class F>
  void for_each_pair(const Word& word, F&& f) const {
    for (size_t i = 1; i < word.symbols.size(); ++i) {
      const int32_t left = word.symbols[i - 1], right = word.symbols[i];
      if (mergeable_[left] && mergeable_[right]) f(pair_key(left, right));
    }
  }

  void merge(int32_t left, int32_t right) {
    merges_.push_back(tokens_[left] + " " + tokens_[right]);
    // Merge results only join mergeable tokens, so they are mergeable too. Should two merges
    // ever spell the same string, the token keeps its first id (as in Hugging Face's trainer).
    const int32_t merged = add_token(tokens_[left] + tokens_[right], true);

    const uint64_t key = pair_key(left, right);
    std::vector<uint32_t> affected = std::move(where_[key]);
    where_.erase(key);
    std::sort(affected.begin(), affected.end());
    affected.erase(std::unique(affected.begin(), affected.end()), affected.end());

    // Only the pairs around each replaced occurrence change: for "p A B n" -> "p X n", (p, A)
    // and (B, n) lose the word's count, (p, X) and (X, n) gain it. `p` is taken from the
    // rewritten word, so back-to-back occurrences ("A B A B" -> "X X") come out right.
    changes_.clear();
    const auto change = [&](int32_t a, int32_t b, int64_t by) {
      if (mergeable_[a] && mergeable_[b]) changes_.push_back({pair_key(a, b), by});
    };
    for (const uint32_t index : affected) {
      Word& word = words_[index];
      std::vector<int32_t>& s = word.symbols;
      size_t out = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == left && s[i + 1] == right) {
          change(left, right, -word.count);
          if (out > 0) {
            change(s[out - 1], left, -word.count);
            change(s[out - 1], merged, word.count);
          }
          if (i + 2 < s.size()) {
            change(right, s[i + 2], -word.count);
            change(merged, s[i + 2], word.count);
          }
          s[out++] = merged;
          ++i;
        } else {
          s[out++] = s[i];
        }
      }
      if (out == s.size()) continue;  // the word lost this pair to an earlier merge
      s.resize(out);
      for_each_pair(word, [&](uint64_t k) {
        if (key_left(k) == merged || key_right(k) == merged) where_[k].push_back(index);
      });
    }

    // Sum the changes per pair, then apply them; a pair whose count rose is queued afresh.
    std::sort(changes_.begin(), changes_.end());
    for (size_t i = 0; i < changes_.size();) {
      const uint64_t k = changes_[i].first;
      int64_t total = 0;
      for (; i < changes_.size() && changes_[i].first == k; ++i) total += changes_[i].second;
      if (total == 0) continue;
      int64_t& count = counts_[k];
      count += total;
      if (total > 0) push({count, key_left(k), key_right(k)});
      if (count == 0) counts_.erase(k);
    }
  }

  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<bool> mergeable_;  // false: an ASCII digit while digit merges are off
  std::vector<std::string> merges_;
  std::vector<Word> words_;
  std::unordered_map<uint64_t, int64_t> counts_;               // mergeable pairs that occur
  std::unordered_map<uint64_t, std::vector<uint32_t>> where_;  // pair -> words (may repeat or be stale)
  std::vector<Entry> heap_;
  std::vector<std::pair<uint64_t, int64_t>> changes_;  // one merge's pair count changes (reused)
};

}  // namespace

BpeTrainer::BpeTrainer(BpeTrainerOptions options)
    : options_(std::move(options)), pre_(PreTokenizer::for_name(options_.pre)) {
  if (options_.vocab_size < kMinVocabSize) {
    fail("vocabulary size {} is too small: the 256 byte tokens and BOS/EOS need at least {}", options_.vocab_size,
         kMinVocabSize);
  }
}

void BpeTrainer::add_text(std::string_view text) {
  for (const std::string_view chunk : line_chunks(text)) {
    for (const std::string_view piece : pre_.split(chunk)) {
      const auto it = words_.find(piece);
      if (it != words_.end()) {
        ++it->second;
      } else {
        words_.emplace(std::string(piece), 1);
      }
    }
  }
}

TrainedVocab BpeTrainer::train() const {
  if (words_.empty()) fail("no training text: the input is empty");
  Merger merger(words_, options_.allow_digit_merges);
  const int32_t target = options_.vocab_size - kSpecialTokens;
  while (merger.n_tokens() < target) {
    if (!merger.merge_best()) {
      fail(
          "the training text has no pair left to merge after {} merges: it supports at most {} tokens, not {}; "
          "give more text or a smaller vocabulary",
          merger.merges().size(), merger.n_tokens() + kSpecialTokens, options_.vocab_size);
    }
  }

  TrainedVocab vocab;
  vocab.pre = options_.pre;
  vocab.tokens = merger.tokens();
  vocab.types.assign(vocab.tokens.size(), TokenType::Normal);
  vocab.merges = merger.merges();
  vocab.bos_id = static_cast<int32_t>(vocab.tokens.size());
  vocab.tokens.emplace_back(kTrainedBosText);
  vocab.eos_id = static_cast<int32_t>(vocab.tokens.size());
  vocab.tokens.emplace_back(kTrainedEosText);
  vocab.types.resize(vocab.tokens.size(), TokenType::Control);
  return vocab;
}

}  // namespace kvslim::tok
