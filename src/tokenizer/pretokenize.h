// Pre-tokenizers for byte-level BPE vocabularies, selected by tokenizer.ggml.pre. Each one is a
// sequence of regexes applied like Hugging Face's `Split(behavior=Isolated)` steps (and like
// llama.cpp): every regex runs separately over each piece produced by the previous one, and both
// its matches and the unmatched text between them become pieces. A regex never sees across a
// piece boundary, so lookaheads such as (?!\S) treat the end of a piece as the end of input.
#pragma once

#include <unicode/uversion.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

U_NAMESPACE_BEGIN
class RegexPattern;
U_NAMESPACE_END

namespace kvslim::tok {

class PreTokenizer {
 public:
  // Throws kvslim::Error for an unknown name, listing the supported ones.
  static PreTokenizer for_name(const std::string& name);

  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // The pieces of `text`, in order, covering it exactly (views into `text`). Invalid UTF-8
  // bytes are classified as U+FFFD but stay in their piece unchanged.
  std::vector<std::string_view> split(std::string_view text) const;

  // Llama-3 style vocabularies take a whole piece as one token when it is in the vocabulary,
  // before (instead of) applying merges.
  bool ignore_merges() const { return ignore_merges_; }
  // Whether BOS is added when the file does not say (tokenizer.ggml.add_bos_token).
  bool default_add_bos() const { return default_add_bos_; }

 private:
  PreTokenizer() = default;

  // Compiled once; RegexPattern is immutable, and each split() makes its own matchers, so
  // concurrent encodes are safe.
  std::vector<std::unique_ptr<icu::RegexPattern>> stages_;
  bool ignore_merges_ = false;
  bool default_add_bos_ = false;
};

// Cuts `text` into consecutive chunks of about `target_bytes` or more: a chunk ends only at a
// lone '\n' between two ASCII letters, digits or punctuation characters. No piece of any
// supported pre-tokenizer spans such a newline or depends on what lies beyond it (a whitespace
// run that ends a piece is just "\n" there, with or without the text after it), so splitting the
// chunks one by one gives the pieces of the whole text while ICU's UTF-16 copy stays small.
std::vector<std::string_view> line_chunks(std::string_view text, size_t target_bytes = size_t{1} << 20);

}  // namespace kvslim::tok
