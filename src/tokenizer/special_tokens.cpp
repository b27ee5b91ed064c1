#include "tokenizer/special_tokens.h"

#include <algorithm>

namespace kvslim::tok {

SpecialTokenSplitter::SpecialTokenSplitter(const Vocab& vocab) {
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const TokenData& token = vocab.token(id);
    if (token.text.empty()) continue;
    const bool user_defined = token.type == TokenType::UserDefined;
    if (user_defined || token.type == TokenType::Control || token.type == TokenType::Unknown) {
      candidates_.push_back({id, token.text, user_defined});
    }
  }
  std::stable_sort(candidates_.begin(), candidates_.end(),
                   [](const Candidate& a, const Candidate& b) { return a.text.size() > b.text.size(); });

  terminal_.push_back(-1);  // the root
  for (size_t i = 0; i < candidates_.size(); ++i) {
    uint32_t node = 0;
    for (const char c : candidates_[i].text) {
      const uint64_t key = (uint64_t{node} << 8) | static_cast<unsigned char>(c);
      auto [it, inserted] = edges_.try_emplace(key, static_cast<uint32_t>(terminal_.size()));
      if (inserted) terminal_.push_back(-1);
      node = it->second;
    }
    // Two tokens with one spelling cannot both match; the first (lowest id) keeps the node.
    if (terminal_[node] < 0) terminal_[node] = static_cast<int32_t>(i);
  }
}

std::vector<bool> SpecialTokenSplitter::occurring(std::string_view text, bool parse_special) const {
  std::vector<bool> found(candidates_.size(), false);
  for (size_t start = 0; start < text.size(); ++start) {
    uint32_t node = 0;
    for (size_t i = start; i < text.size(); ++i) {
      const auto it = edges_.find((uint64_t{node} << 8) | static_cast<unsigned char>(text[i]));
      if (it == edges_.end()) break;
      node = it->second;
      const int32_t candidate = terminal_[node];
      if (candidate >= 0 && (parse_special || candidates_[candidate].always)) found[candidate] = true;
    }
  }
  return found;
}

std::vector<Fragment> SpecialTokenSplitter::split(std::string_view text, bool parse_special) const {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({-1, 0, text.size()});
  if (candidates_.empty()) return fragments;

  const std::vector<bool> found = occurring(text, parse_special);
  std::vector<Fragment> next;
  for (size_t c = 0; c < candidates_.size(); ++c) {
    if (!found[c]) continue;
    const Candidate& special = candidates_[c];
    next.clear();
    for (const Fragment& fragment : fragments) {
      if (fragment.token >= 0) {
        next.push_back(fragment);
        continue;
      }
      const std::string_view raw = text.substr(fragment.offset, fragment.length);
      size_t pos = 0;
      for (size_t hit = raw.find(special.text); hit != std::string_view::npos; hit = raw.find(special.text, pos)) {
        if (hit > pos) next.push_back({-1, fragment.offset + pos, hit - pos});
        next.push_back({special.id, fragment.offset + hit, special.text.size()});
        pos = hit + special.text.size();
      }
      if (pos < raw.size()) next.push_back({-1, fragment.offset + pos, raw.size() - pos});
    }
    fragments.swap(next);
  }
  return fragments;
}

}  // namespace kvslim::tok
