// Tokenizer construction from GGUF metadata, special-token handling, encode dispatch and decode.
//
// Conventions (following llama.cpp, whose behaviour GGUF models are converted for):
// - SentencePiece (`llama`) text gets a leading space when tokenizer.ggml.add_space_prefix is
//   true (the default) at the start and after every special token, so decode(encode(x))
//   returns " " + x: the leading space is kept and callers strip it if they want.
// - Byte-level BPE (`gpt2`) decodes back to exactly the input bytes.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string_view>

#include "tokenizer/bpe.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/spm.h"
#include "tokenizer/vocab.h"
#include "util/error.h"

namespace kvslim {

namespace {

using tok::TokenType;

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

// Control tokens that end a turn in common chat formats even when the metadata names only
// one end token (e.g. EOS = <|endoftext|> while chat turns end with <|im_end|>).
// gpt-oss (harmony) ends its answer with <|return|> and a tool call with <|call|>.
constexpr std::array<std::string_view, 10> kEndMarkers = {
    "<|eot_id|>",    "<|eom_id|>",      "<|im_end|>", "<|end|>",    "<end_of_turn>",
    "<|endoftext|>", "<|end_of_text|>", "<EOT>",      "<|return|>", "<|call|>",
};

// A special token id from metadata: nullopt when the key is absent, -1 when it is negative or
// outside the vocabulary (converters write such placeholders for "none").
std::optional<int32_t> metadata_token_id(const gguf::File& file, std::string_view key, int32_t n_vocab) {
  const gguf::Value* value = file.find(key);
  if (value == nullptr) return std::nullopt;
  const bool is_signed = value->type == gguf::ValueType::INT8 || value->type == gguf::ValueType::INT16 ||
                         value->type == gguf::ValueType::INT32 || value->type == gguf::ValueType::INT64;
  if (is_signed && value->i < 0) return -1;
  const uint64_t id = file.get_uint(key);
  return id < static_cast<uint64_t>(n_vocab) ? static_cast<int32_t>(id) : -1;
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  for (size_t hit = text.find(from); hit != std::string_view::npos; hit = text.find(from, pos)) {
    out.append(text.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(text.substr(pos));
  return out;
}

}  // namespace

struct Tokenizer::Impl {
  explicit Impl(tok::Vocab v) : vocab(std::move(v)), specials(vocab) {}

  std::string model_name;
  std::string pre_name;
  tok::Vocab vocab;
  tok::SpecialTokenSplitter specials;
  bool is_spm = true;
  bool add_space_prefix = true;  // SentencePiece only
  // Byte-level BPE only; SentencePiece needs nothing beyond the vocabulary.
  std::optional<tok::PreTokenizer> pre;
  std::optional<tok::BpeMerges> merges;

  bool add_bos = false;
  int32_t bos = -1;
  int32_t eos = -1;
  int32_t unk = -1;
  std::vector<int32_t> end_ids;  // sorted

  void encode_spm(std::string_view fragment, bool after_special, std::vector<int32_t>& out) const {
    std::string text = add_space_prefix && after_special ? " " : "";
    text.append(fragment);
    tok::spm_tokenize(vocab, unk, replace_all(text, " ", kSpmSpace), out);
  }

  void encode_bpe(std::string_view fragment, std::vector<int32_t>& out) const {
    std::string word;
    for (const std::string_view piece : pre->split(fragment)) {
      word.clear();
      tok::append_byte_level(word, piece);
      const int32_t whole = pre->ignore_merges() ? vocab.find(word) : -1;
      if (whole >= 0) {
        out.push_back(whole);
      } else {
        merges->encode_word(vocab, unk, word, out);
      }
    }
  }
};

Tokenizer Tokenizer::from_gguf(const gguf::File& file) {
  const std::string model = file.get_string("tokenizer.ggml.model");
  if (model != "llama" && model != "gpt2") {
    fail("{}: unsupported tokenizer model '{}' (tokenizer.ggml.model); supported: llama, gpt2", file.path(), model);
  }
  auto impl = std::make_unique<Impl>(tok::Vocab::from_gguf(file));
  impl->model_name = model;
  impl->pre_name = file.get_string_opt("tokenizer.ggml.pre").value_or("default");
  impl->is_spm = model == "llama";
  const int32_t n_vocab = impl->vocab.size();

  // Defaults when the metadata is silent: SentencePiece models number <unk>, <s>, </s> first.
  int32_t default_bos = -1, default_eos = -1, default_unk = -1;
  if (impl->is_spm) {
    impl->add_space_prefix = file.get_bool_opt("tokenizer.ggml.add_space_prefix").value_or(true);
    impl->add_bos = true;
    default_unk = n_vocab > 0 ? 0 : -1;
    default_bos = n_vocab > 1 ? 1 : -1;
    default_eos = n_vocab > 2 ? 2 : -1;
  } else {
    impl->pre.emplace(tok::PreTokenizer::for_name(impl->pre_name));
    impl->merges.emplace(impl->vocab, file.get_string_array("tokenizer.ggml.merges"));
    impl->add_bos = impl->pre->default_add_bos();
  }
  impl->add_bos = file.get_bool_opt("tokenizer.ggml.add_bos_token").value_or(impl->add_bos);
  impl->bos = metadata_token_id(file, "tokenizer.ggml.bos_token_id", n_vocab).value_or(default_bos);
  impl->eos = metadata_token_id(file, "tokenizer.ggml.eos_token_id", n_vocab).value_or(default_eos);
  impl->unk = metadata_token_id(file, "tokenizer.ggml.unknown_token_id", n_vocab).value_or(default_unk);

  std::vector<int32_t>& ends = impl->end_ids;
  for (const int32_t id : {impl->eos, metadata_token_id(file, "tokenizer.ggml.eot_token_id", n_vocab).value_or(-1),
                           metadata_token_id(file, "tokenizer.ggml.eom_token_id", n_vocab).value_or(-1)}) {
    if (id >= 0) ends.push_back(id);
  }
  const auto control_id = [&](std::string_view text) {
    const int32_t id = impl->vocab.find(text);
    return id >= 0 && impl->vocab.token(id).type == TokenType::Control ? id : -1;
  };
  for (const std::string_view marker : kEndMarkers) {
    if (const int32_t id = control_id(marker); id >= 0) ends.push_back(id);
  }
  // In the harmony format <|end|> closes one message (the reasoning channel's) and the answer
  // follows in another: with <|return|> and <|call|> present it does not end generation (as in
  // llama.cpp, which has the same rule for these vocabularies), even when metadata names it.
  if (control_id("<|return|>") >= 0 && control_id("<|call|>") >= 0) std::erase(ends, control_id("<|end|>"));
  std::sort(ends.begin(), ends.end());
  ends.erase(std::unique(ends.begin(), ends.end()), ends.end());

  return Tokenizer(std::move(impl));
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  const Impl& impl = *impl_;
  std::vector<int32_t> out;
  if (add_bos) {
    if (impl.bos < 0) fail("cannot add BOS: the vocabulary has no BOS token");
    out.push_back(impl.bos);
  }
  bool after_special = true;  // the start of the text counts as following a special token
  for (const tok::Fragment& fragment : impl.specials.split(text, parse_special)) {
    if (fragment.token >= 0) {
      out.push_back(fragment.token);
      after_special = true;
      continue;
    }
    const std::string_view raw = text.substr(fragment.offset, fragment.length);
    if (impl.is_spm) {
      impl.encode_spm(raw, after_special, out);
    } else {
      impl.encode_bpe(raw, out);
    }
    after_special = false;
  }
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  const Impl& impl = *impl_;
  if (!impl.vocab.contains(id)) fail("token id {} is outside the vocabulary ({} tokens)", id, impl.vocab.size());
  const tok::TokenData& token = impl.vocab.token(id);
  switch (token.type) {
    case TokenType::Normal:
      return impl.is_spm ? replace_all(token.text, kSpmSpace, " ") : tok::byte_level_decode(token.text);
    case TokenType::Byte: {
      const int byte = tok::parse_byte_token(token.text);
      return byte >= 0 ? std::string(1, static_cast<char>(byte)) : token.text;
    }
    case TokenType::UserDefined: return token.text;
    case TokenType::Control:
    case TokenType::Unknown: return render_special ? token.text : std::string();
    case TokenType::Unused:
    case TokenType::Undefined: break;
  }
  return {};
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
  std::string text;
  for (const int32_t id : ids) text += token_to_piece(id, render_special);
  return text;
}

int32_t Tokenizer::n_vocab() const { return impl_->vocab.size(); }
int32_t Tokenizer::bos_id() const { return impl_->bos; }
int32_t Tokenizer::eos_id() const { return impl_->eos; }

bool Tokenizer::is_end_of_generation(int32_t id) const {
  return std::binary_search(impl_->end_ids.begin(), impl_->end_ids.end(), id);
}

bool Tokenizer::add_bos_by_default() const { return impl_->add_bos && impl_->bos >= 0; }
const std::string& Tokenizer::model_name() const { return impl_->model_name; }
const std::string& Tokenizer::pre_name() const { return impl_->pre_name; }

}  // namespace kvslim
