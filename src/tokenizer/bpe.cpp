#include "tokenizer/bpe.h"

#include <queue>

#include "util/utf8.h"

namespace kvslim::tok {

namespace {

// One token of a word being merged, linked to its neighbours in word order. A symbol merged
// into its left neighbour gets id -2 and leaves the list.
struct Symbol {
  int32_t id;  // -1: a character that is no token (it never merges)
  int prev;
  int next;
};

constexpr int32_t kMergedAway = -2;

struct Candidate {
  int32_t rank;
  int left;
  int right;
  int32_t left_id;  // ids when queued; if either symbol changed since, the candidate is stale
  int32_t right_id;
  int32_t result;
};

struct LowerPriority {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

BpeMerges::BpeMerges(const Vocab& vocab, const std::vector<std::string>& merges) {
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& line = merges[rank];
    // Search from index 1 so that a left part spelled " " (in non byte-level vocabularies)
    // still splits at the separating space.
    const size_t space = line.find(' ', 1);
    if (space == std::string::npos) continue;
    const std::string_view left(line.data(), space);
    const std::string_view right(line.data() + space + 1, line.size() - space - 1);
    const int32_t left_id = vocab.find(left);
    const int32_t right_id = vocab.find(right);
    const int32_t result = vocab.find(std::string(left) + std::string(right));
    if (left_id < 0 || right_id < 0 || result < 0) continue;
    // The first (best-ranked) occurrence of a pair wins.
    merges_.try_emplace(key(left_id, right_id), Merge{static_cast<int32_t>(rank), result});
  }
}

const BpeMerges::Merge* BpeMerges::find(int32_t left, int32_t right) const {
  if (left < 0 || right < 0) return nullptr;
  const auto it = merges_.find(key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeMerges::encode_word(const Vocab& vocab, int32_t unk_id, std::string_view word,
                            std::vector<int32_t>& out) const {
  std::vector<Symbol> symbols;
  for (size_t pos = 0; pos < word.size();) {
    const size_t length = utf8_char_length(word, pos);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({vocab.find(word.substr(pos, length)), index - 1, pos + length == word.size() ? -1 : index + 1});
    pos += length;
  }

  std::priority_queue<Candidate, std::vector<Candidate>, LowerPriority> queue;
  const auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    if (const Merge* merge = find(symbols[left].id, symbols[right].id)) {
      queue.push({merge->rank, left, right, symbols[left].id, symbols[right].id, merge->result});
    }
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.left];
    Symbol& right = symbols[c.right];
    if (left.id != c.left_id || right.id != c.right_id || left.next != c.right) continue;

    left.id = c.result;
    right.id = kMergedAway;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    try_add(left.prev, c.left);
    try_add(c.left, left.next);
  }

  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    if (symbols[i].id >= 0) {
      out.push_back(symbols[i].id);
    } else if (unk_id >= 0) {
      out.push_back(unk_id);
    }
  }
}

}  // namespace kvslim::tok
