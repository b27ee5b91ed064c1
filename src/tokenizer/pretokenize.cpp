#include "tokenizer/pretokenize.h"

#include <unicode/regex.h>
#include <unicode/unistr.h>

#include <algorithm>

#include "util/utf8.h"
#include "util/error.h"

namespace kvslim::tok {

namespace {

// The regexes are those of the models' Hugging Face tokenizer.json files, in ICU syntax
// (ICU's \s is Unicode White_Space, as in the Rust/Oniguruma engines Hugging Face uses).

// GPT-2: contractions, optionally space-prefixed runs of letters / digits / other symbols, and
// whitespace runs that leave their last space to prefix the next word.
constexpr const char* kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Llama 3: case-insensitive contractions, a letter run with one optional leading non-letter,
// digits in groups of up to three, punctuation runs swallowing following newlines.
constexpr const char* kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen2: Llama 3's pattern with single digits.
constexpr const char* kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// GPT-4o / o200k (gpt-oss): a word is an optional leading non-letter, then either upper-case
// letters followed by lower-case ones or an upper-case run with optional lower-case tail (so
// "HTTPServer" splits as "HTTPServer" but "camelCase" as "camel", "Case"), with a contraction
// suffix of any case attached; digits in groups of up to three; punctuation runs keep trailing
// newlines and slashes.
constexpr const char* kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// DeepSeek LLM's explicit list of cased-letter ranges (Latin, Greek, Cyrillic, Armenian,
// Georgian, Cherokee, Glagolitic, Coptic, fullwidth Latin, Deseret, Osage, ...).
constexpr const char* kDeepseekLetters =
    R"(A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293})"
    R"(\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A})"
    R"(\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556})"
    R"(\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})"
    R"(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})"
    R"(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D})"
    R"(\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4})"
    R"(\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4})"
    R"(\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124})"
    R"(\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149})"
    R"(\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2})"
    R"(\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787})"
    R"(\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A})"
    R"(\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB})"
    R"(\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943})";

// CJK ideographs, the (odd but original) U+0800..U+4E00 block range, and Hangul, as one class.
constexpr const char* kDeepseekCjk = R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";

struct Variant {
  std::vector<std::string> names;
  std::vector<std::string> regexes;
  bool ignore_merges = false;
  bool default_add_bos = false;
};

const std::vector<Variant>& variants() {
  static const std::vector<Variant> table = {
      // llama.cpp's fallback for BPE vocabularies that name no pre-tokenizer.
      {{"default"}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
      {{"gpt-2", "phi-2", "mpt", "olmo", "jais", "exaone4"}, {kGpt2}},
      {{"llama-bpe", "llama3", "llama-v3", "falcon3", "pixtral"},
       {kLlama3},
       /*ignore_merges=*/true,
       /*default_add_bos=*/true},
      {{"dbrx", "smaug-bpe"}, {kLlama3}},
      {{"gpt-4o", "llama4"}, {kGpt4o}},
      {{"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", "hunyuan"}, {kQwen2}},
      {{"deepseek-llm"},
       {R"([\r\n])", std::string(R"(\s?[)") + kDeepseekLetters + "]+",
        R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)",
        // The original is \s+$; starting only where a whitespace run starts finds the same match
        // without rescanning a long run from each of its positions (quadratic time).
        R"((?<!\s)\s+$)", kDeepseekCjk, R"(\p{N}+)"}},
      {{"deepseek-coder"}, {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepseekCjk, R"(\p{N})"}},
      {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"}, {R"(\p{N})", kGpt2}},
  };
  return table;
}

std::string supported_names() {
  std::string list;
  for (const Variant& variant : variants()) {
    for (const std::string& name : variant.names) {
      if (!list.empty()) list += ", ";
      list += name;
    }
  }
  return list;
}

std::unique_ptr<icu::RegexPattern> compile(const std::string& regex) {
  UParseError where{};
  UErrorCode status = U_ZERO_ERROR;
  // UNIX_LINES: only \n ends a line, so `$` means "end of piece" like in the original engines.
  std::unique_ptr<icu::RegexPattern> pattern(
      icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(regex), UREGEX_UNIX_LINES, where, status));
  if (U_FAILURE(status)) {
    fail("pre-tokenizer regex /{}/ does not compile (ICU: {} at offset {})", regex, u_errorName(status), where.offset);
  }
  return pattern;
}

// A piece as a range of UTF-16 units in the converted text.
struct Span {
  int32_t begin;
  int32_t end;
};

}  // namespace

PreTokenizer PreTokenizer::for_name(const std::string& name) {
  for (const Variant& variant : variants()) {
    if (std::find(variant.names.begin(), variant.names.end(), name) == variant.names.end()) continue;
    PreTokenizer pre;
    for (const std::string& regex : variant.regexes) pre.stages_.push_back(compile(regex));
    pre.ignore_merges_ = variant.ignore_merges;
    pre.default_add_bos_ = variant.default_add_bos;
    return pre;
  }
  fail("unsupported pre-tokenizer '{}' (tokenizer.ggml.pre); supported: {}", name, supported_names());
}

PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;

  // ICU matches UTF-16; remember where each UTF-16 unit came from in the UTF-8 input.
  icu::UnicodeString utf16;
  std::vector<size_t> byte_offset;  // UTF-16 index -> UTF-8 offset, plus one entry for the end
  byte_offset.reserve(text.size() + 1);
  for (size_t pos = 0; pos < text.size();) {
    const size_t start = pos;
    utf16.append(static_cast<UChar32>(decode_utf8(text, pos)));
    byte_offset.resize(static_cast<size_t>(utf16.length()), start);
  }
  byte_offset.push_back(text.size());

  std::vector<Span> spans = {{0, utf16.length()}};
  std::vector<Span> next;
  for (const auto& stage : stages_) {
    UErrorCode status = U_ZERO_ERROR;
    std::unique_ptr<icu::RegexMatcher> matcher(stage->matcher(utf16, status));
    if (U_FAILURE(status)) fail("pre-tokenizer: cannot create a regex matcher (ICU: {})", u_errorName(status));
    next.clear();
    for (const Span& span : spans) {
      matcher->region(span.begin, span.end, status);
      int32_t done = span.begin;
      while (matcher->find(status) && U_SUCCESS(status)) {
        const int32_t begin = matcher->start(status);
        const int32_t end = matcher->end(status);
        if (end == begin) continue;
        if (begin > done) next.push_back({done, begin});
        next.push_back({begin, end});
        done = end;
      }
      if (U_FAILURE(status)) fail("pre-tokenizer: regex matching failed (ICU: {})", u_errorName(status));
      if (done < span.end) next.push_back({done, span.end});
    }
    spans.swap(next);
  }

  pieces.reserve(spans.size());
  for (const Span& span : spans) {
    const size_t begin = byte_offset[static_cast<size_t>(span.begin)];
    const size_t end = byte_offset[static_cast<size_t>(span.end)];
    pieces.push_back(text.substr(begin, end - begin));
  }
  return pieces;
}

namespace {

bool is_ascii_graphic(char c) { return c > ' ' && c < 0x7F; }

}  // namespace

std::vector<std::string_view> line_chunks(std::string_view text, size_t target_bytes) {
  std::vector<std::string_view> chunks;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.size();
    for (size_t pos = begin + std::max<size_t>(target_bytes, 2) - 1; pos + 1 < text.size(); ++pos) {
      if (text[pos] == '\n' && is_ascii_graphic(text[pos - 1]) && is_ascii_graphic(text[pos + 1])) {
        end = pos + 1;
        break;
      }
    }
    chunks.push_back(text.substr(begin, end - begin));
    begin = end;
  }
  return chunks;
}

}  // namespace kvslim::tok
