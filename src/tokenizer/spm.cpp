#include "tokenizer/spm.h"

#include <queue>

#include "util/utf8.h"

namespace kvslim::tok {

namespace {

// A run of text that is one piece so far; symbols form a doubly linked list in text order.
// A symbol swallowed by its left neighbour keeps length 0.
struct Symbol {
  size_t start;
  size_t length;
  int prev;
  int next;
};

struct Bigram {
  int left;
  int right;
  float score;
  size_t length;  // combined length when queued; a mismatch later means the pair is stale
};

struct LowerPriority {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

// Only ordinary pieces come out of merging: SentencePiece never spells control, unknown,
// byte or unused pieces from text (user-defined ones were already split out before).
int32_t text_piece(const Vocab& vocab, std::string_view text) {
  const int32_t id = vocab.find(text);
  if (id < 0) return -1;
  const TokenType type = vocab.token(id).type;
  return type == TokenType::Normal || type == TokenType::UserDefined ? id : -1;
}

}  // namespace

void spm_tokenize(const Vocab& vocab, int32_t unk_id, std::string_view text, std::vector<int32_t>& out) {
  std::vector<Symbol> symbols;
  for (size_t pos = 0; pos < text.size();) {
    const size_t length = utf8_char_length(text, pos);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({pos, length, index - 1, pos + length == text.size() ? -1 : index + 1});
    pos += length;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, LowerPriority> queue;
  const auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const size_t length = symbols[left].length + symbols[right].length;
    const int32_t id = text_piece(vocab, text.substr(symbols[left].start, length));
    if (id >= 0) queue.push({left, right, vocab.token(id).score, length});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    if (left.length == 0 || right.length == 0 || left.length + right.length != bigram.length) continue;

    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add(left.prev, bigram.left);
    try_add(bigram.left, left.next);
  }

  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].start, symbols[i].length);
    const int32_t id = text_piece(vocab, piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // Only single characters can be missing from the vocabulary (merges always form pieces).
    bool all_bytes = true;
    for (const char c : piece) all_bytes = all_bytes && vocab.byte_token(static_cast<uint8_t>(c)) >= 0;
    if (all_bytes) {
      for (const char c : piece) out.push_back(vocab.byte_token(static_cast<uint8_t>(c)));
    } else if (unk_id >= 0) {
      out.push_back(unk_id);
    }
  }
}

}  // namespace kvslim::tok
