#include "eval/text_metrics.h"

#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <regex>
#include <set>

#include "util/utf8.h"
#include "util/error.h"

namespace kvslim::eval {
namespace {

using CodePoints = std::u32string;

CodePoints code_points(std::string_view text) {
  CodePoints out;
  for (size_t pos = 0; pos < text.size();) out += char32_t(decode_utf8(text, pos));
  return out;
}

std::string utf8(const CodePoints& text) {
  std::string out;
  for (const char32_t c : text) append_utf8(out, uint32_t(c));
  return out;
}

// Python's str.isspace: Unicode White_Space plus the separators U+001C..U+001F.
bool is_space(char32_t c) { return u_isUWhiteSpace(UChar32(c)) || (c >= 0x1C && c <= 0x1F); }

// Python's re \w for str patterns: letters, digits and the underscore.
bool is_word(char32_t c) { return c == U'_' || u_isalnum(UChar32(c)); }

// Python's str.split(): runs of non-space characters.
std::vector<CodePoints> split_on_space(const CodePoints& text) {
  std::vector<CodePoints> out;
  for (size_t i = 0; i < text.size();) {
    if (is_space(text[i])) {
      ++i;
      continue;
    }
    const size_t start = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    out.push_back(text.substr(start, i - start));
  }
  return out;
}

// Python's str.split(sep): every piece between separators, empty ones included.
std::vector<CodePoints> split_at(const CodePoints& text, char32_t sep) {
  std::vector<CodePoints> out(1);
  for (const char32_t c : text) {
    if (c == sep) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

CodePoints join(const std::vector<CodePoints>& pieces, char32_t sep) {
  CodePoints out;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (i) out += sep;
    out += pieces[i];
  }
  return out;
}

// Python's string.punctuation.
bool is_ascii_punctuation(char32_t c) {
  return c < 128 && std::string_view("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~").find(char(c)) != std::string_view::npos;
}

CodePoints normalized(std::string_view text) {
  // lower(): full Unicode lower-casing, as Python's str.lower.
  std::string lowered;
  icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), int32_t(text.size()))).toLower().toUTF8String(lowered);
  CodePoints kept;
  for (const char32_t c : code_points(lowered)) {
    if (!is_ascii_punctuation(c)) kept += c;
  }
  // re.sub(r"\b(a|an|the)\b", " ", ...): a whole word run that is an article becomes a space.
  CodePoints no_articles;
  for (size_t i = 0; i < kept.size();) {
    if (!is_word(kept[i])) {
      no_articles += kept[i++];
      continue;
    }
    const size_t start = i;
    while (i < kept.size() && is_word(kept[i])) ++i;
    const CodePoints word = kept.substr(start, i - start);
    no_articles += (word == U"a" || word == U"an" || word == U"the") ? CodePoints(U" ") : word;
  }
  return join(split_on_space(no_articles), U' ');
}

// All runs of ASCII digits, as re.findall(r"\d+", ...) finds them in ASCII text.
std::vector<std::string> numbers_in(std::string_view text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    const size_t start = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    out.emplace_back(text.substr(start, i - start));
  }
  return out;
}

double fraction_equal(const std::vector<std::string>& numbers, std::string_view expected) {
  if (numbers.empty()) return 0.0;
  return double(std::count(numbers.begin(), numbers.end(), expected)) / double(numbers.size());
}

// The rouge package's sentences: split at '.', empty pieces dropped, whitespace collapsed.
std::vector<CodePoints> rouge_sentences(std::string_view text) {
  std::vector<CodePoints> out;
  for (const CodePoints& piece : split_at(code_points(text), U'.')) {
    if (!piece.empty()) out.push_back(join(split_on_space(piece), U' '));
  }
  return out;
}

// The words of one LCS of x and y, reconstructed as the rouge package does (from the end; on a
// mismatch step back in x when that keeps a strictly longer LCS, else in y).
std::vector<CodePoints> lcs_words(const std::vector<CodePoints>& x, const std::vector<CodePoints>& y) {
  const size_t n = x.size(), m = y.size();
  std::vector<std::vector<int>> table(n + 1, std::vector<int>(m + 1, 0));
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      table[i][j] = x[i - 1] == y[j - 1] ? table[i - 1][j - 1] + 1 : std::max(table[i - 1][j], table[i][j - 1]);
    }
  }
  std::vector<CodePoints> out;
  for (size_t i = n, j = m; i > 0 && j > 0;) {
    if (x[i - 1] == y[j - 1]) {
      out.push_back(x[i - 1]);
      --i;
      --j;
    } else if (table[i - 1][j] > table[i][j - 1]) {
      --i;
    } else {
      --j;
    }
  }
  return out;
}

}  // namespace

std::string normalize_answer(std::string_view text) { return utf8(normalized(text)); }

double qa_f1_score(std::string_view prediction, std::string_view ground_truth) {
  const std::vector<CodePoints> predicted = split_on_space(normalized(prediction));
  const std::vector<CodePoints> truth = split_on_space(normalized(ground_truth));
  std::map<CodePoints, int> truth_counts;
  for (const CodePoints& word : truth) ++truth_counts[word];
  int same = 0;
  for (const CodePoints& word : predicted) {
    auto it = truth_counts.find(word);
    if (it != truth_counts.end() && it->second > 0) {
      --it->second;
      ++same;
    }
  }
  if (same == 0) return 0.0;
  const double precision = double(same) / double(predicted.size());
  const double recall = double(same) / double(truth.size());
  return 2 * precision * recall / (precision + recall);
}

double rouge_l_score(std::string_view prediction, std::string_view ground_truth) {
  const std::vector<CodePoints> hyp = rouge_sentences(prediction);
  const std::vector<CodePoints> ref = rouge_sentences(ground_truth);
  if (hyp.empty() || ref.empty()) return 0.0;  // the package raises; LongBench scores 0
  std::vector<std::vector<CodePoints>> hyp_words, ref_words;
  std::set<CodePoints> hyp_vocab, ref_vocab;
  for (const CodePoints& s : hyp) {
    const auto& words = hyp_words.emplace_back(split_at(s, U' '));
    hyp_vocab.insert(words.begin(), words.end());
  }
  for (const CodePoints& s : ref) {
    const auto& words = ref_words.emplace_back(split_at(s, U' '));
    ref_vocab.insert(words.begin(), words.end());
  }
  std::set<CodePoints> lcs_union;
  for (const auto& r : ref_words) {
    for (const auto& h : hyp_words) {
      for (CodePoints& word : lcs_words(r, h)) lcs_union.insert(std::move(word));
    }
  }
  const double overlap = double(lcs_union.size());
  const double recall = overlap / double(ref_vocab.size());
  const double precision = overlap / double(hyp_vocab.size());
  return 2.0 * (precision * recall / (precision + recall + 1e-8));
}

double classification_score(std::string_view prediction, std::string_view ground_truth,
                            const std::vector<std::string>& all_classes) {
  std::vector<std::string> matches;
  for (const std::string& name : all_classes) {
    if (prediction.find(name) != std::string_view::npos) matches.push_back(name);
  }
  // LongBench removes from the list it is iterating over, so the class after a removed one is
  // never examined; the index below advances the same way.
  for (size_t i = 0; i < matches.size(); ++i) {
    const std::string term = matches[i];
    if (ground_truth.find(term) != std::string_view::npos && term != ground_truth) {
      matches.erase(std::find(matches.begin(), matches.end(), term));
    }
  }
  if (std::find(matches.begin(), matches.end(), ground_truth) == matches.end()) return 0.0;
  return 1.0 / double(matches.size());
}

double retrieval_score(std::string_view prediction, std::string_view ground_truth) {
  static const std::regex paragraph("Paragraph (\\d+)");
  std::match_results<std::string_view::const_iterator> match;
  if (!std::regex_search(ground_truth.begin(), ground_truth.end(), match, paragraph)) {
    fail("retrieval answer '{}' names no paragraph (expected \"Paragraph N\")", ground_truth);
  }
  return fraction_equal(numbers_in(prediction), match[1].str());
}

double count_score(std::string_view prediction, std::string_view ground_truth) {
  return fraction_equal(numbers_in(prediction), ground_truth);
}

double code_sim_score(std::string_view prediction, std::string_view ground_truth) {
  // Python: the lines of prediction.lstrip('\n'); "" when none qualifies. The ratio of an empty
  // line is 0 (or 1 against an empty ground truth), as fuzzywuzzy's checks give.
  std::string_view rest = prediction.substr(std::min(prediction.size(), prediction.find_first_not_of('\n')));
  for (;;) {
    const size_t end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    if (line.find_first_of("`#") == std::string_view::npos && line.find("//") == std::string_view::npos) {
      return std::nearbyint(100.0 * levenshtein_ratio(line, ground_truth)) / 100.0;
    }
    if (end == std::string_view::npos) return levenshtein_ratio("", ground_truth);
    rest = rest.substr(end + 1);
  }
}

double levenshtein_ratio(std::string_view a, std::string_view b) {
  const CodePoints x = code_points(a), y = code_points(b);
  const size_t total = x.size() + y.size();
  if (total == 0) return 1.0;
  // One row of the distance table at a time.
  std::vector<size_t> previous(y.size() + 1), current(y.size() + 1);
  for (size_t j = 0; j <= y.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= x.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= y.size(); ++j) {
      const size_t substitute = previous[j - 1] + (x[i - 1] == y[j - 1] ? 0 : 2);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitute});
    }
    std::swap(previous, current);
  }
  return double(total - previous[y.size()]) / double(total);
}

}  // namespace kvslim::eval
