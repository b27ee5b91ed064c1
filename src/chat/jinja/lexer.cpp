#include "chat/jinja/lexer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "chat/jinja/value.h"
#include "util/utf8.h"

namespace kvslim::jinja {

namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string normalise_newlines(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python's string-literal escapes (Jinja2 decodes literals with "unicode-escape").
std::string unescape(std::string_view body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (c != '\\' || i + 1 == body.size()) {
      out += c;
      continue;
    }
    const char e = body[++i];
    switch (e) {
      case '\n': break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (size_t k = 0; k < digits; ++k) {
          const int h = i + 1 + k < body.size() ? hex_value(body[i + 1 + k]) : -1;
          if (h < 0) throw TemplateError(fmt::format("truncated \\{} escape in a string literal", e), line);
          cp = cp * 16 + static_cast<uint32_t>(h);
        }
        if (cp > 0x10FFFF) throw TemplateError("invalid \\U escape in a string literal", line);
        i += digits;
        append_utf8(out, cp);
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          uint32_t cp = static_cast<uint32_t>(e - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k)
            cp = cp * 8 + static_cast<uint32_t>(body[++i] - '0');
          append_utf8(out, cp);
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t tag = next_tag(pos_);
      if (tag == std::string::npos) {
        emit_text(src_.substr(pos_), line_);
        break;
      }
      const char kind = src_[tag + 1];
      const char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : 0;
      std::string text = src_.substr(pos_, tag - pos_);
      const int text_line = line_;
      const bool line_starting = pos_ == 0 || src_[pos_ - 1] == '\n';
      if (sign == '-') {
        size_t end = text.size();
        while (end > 0 && is_ws(text[end - 1])) --end;
        text.resize(end);
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: indentation alone before a block or comment tag goes.
        const size_t line_start = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if ((line_start > 0 || line_starting) &&
            std::all_of(text.begin() + static_cast<long>(line_start), text.end(), [](char c) { return is_ws(c); }))
          text.resize(line_start);
      }
      emit_text(text, text_line);
      advance_to(tag + 2 + (sign ? 1 : 0));
      if (kind == '#')
        comment();
      else if (kind == '%' && raw_block())
        continue;
      else
        tag_body(kind == '{');
    }
    tokens_.push_back({TokenType::End, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t next_tag(size_t from) const {
    for (size_t p = src_.find('{', from); p != std::string::npos; p = src_.find('{', p + 1))
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) return p;
    return std::string::npos;
  }

  void emit_text(const std::string& text, int line) {
    if (!text.empty()) tokens_.push_back({TokenType::Text, text, line});
  }

  void advance_to(size_t p) {
    line_ +=
        static_cast<int>(std::count(src_.begin() + static_cast<long>(pos_), src_.begin() + static_cast<long>(p), '\n'));
    pos_ = p;
  }

  // After a tag's end delimiter: `-` eats all whitespace, `+` nothing, a plain block or comment
  // end one newline (trim_blocks).
  void after_end(char sign, bool block_or_comment) {
    if (sign == '-') {
      size_t p = pos_;
      while (p < src_.size() && is_ws(src_[p])) ++p;
      advance_to(p);
    } else if (sign != '+' && block_or_comment && pos_ < src_.size() && src_[pos_] == '\n') {
      advance_to(pos_ + 1);
    }
  }

  void comment() {
    const int start_line = line_;
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) throw TemplateError("unterminated comment", start_line);
    const char sign = end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : 0;
    advance_to(end + 2);
    after_end(sign, true);
  }

  // {% raw %}...{% endraw %}: the body is text, tags in it are not interpreted. As in Jinja2,
  // the opening tag takes `-` but not `+`, and trim_blocks does not apply after it.
  bool raw_block() {
    size_t p = pos_;
    while (p < src_.size() && is_ws(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    while (p < src_.size() && is_ws(src_[p])) ++p;
    const bool strip_after = p < src_.size() && src_[p] == '-';
    if (strip_after) ++p;
    if (src_.compare(p, 2, "%}") != 0) return false;
    const int start_line = line_;
    advance_to(p + 2);
    if (strip_after) after_end('-', true);
    // Find {%[-+]? endraw [-+]?%}.
    for (size_t q = src_.find("{%", pos_); q != std::string::npos; q = src_.find("{%", q + 1)) {
      size_t r = q + 2;
      char open_sign = 0;
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) open_sign = src_[r++];
      while (r < src_.size() && is_ws(src_[r])) ++r;
      if (src_.compare(r, 6, "endraw") != 0) continue;
      r += 6;
      while (r < src_.size() && is_ws(src_[r])) ++r;
      char close_sign = 0;
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) close_sign = src_[r++];
      if (src_.compare(r, 2, "%}") != 0) continue;
      std::string body = src_.substr(pos_, q - pos_);
      const bool line_starting = pos_ == 0 || src_[pos_ - 1] == '\n';
      if (open_sign == '-') {
        while (!body.empty() && is_ws(body.back())) body.pop_back();
      } else if (open_sign != '+') {
        const size_t line_start = body.rfind('\n') == std::string::npos ? 0 : body.rfind('\n') + 1;
        if ((line_start > 0 || line_starting) &&
            std::all_of(body.begin() + static_cast<long>(line_start), body.end(), [](char c) { return is_ws(c); }))
          body.resize(line_start);
      }
      emit_text(body, line_);
      advance_to(r + 2);
      after_end(close_sign, true);
      return true;
    }
    throw TemplateError("missing {% endraw %} for this {% raw %}", start_line);
  }

  void tag_body(bool variable) {
    const int start_line = line_;
    tokens_.push_back({variable ? TokenType::VarBegin : TokenType::BlockBegin, "", line_});
    int depth = 0;
    const char close = variable ? '}' : '%';
    while (true) {
      while (pos_ < src_.size() && is_ws(src_[pos_])) advance_to(pos_ + 1);
      if (pos_ >= src_.size())
        throw TemplateError(
            variable ? "unexpected end of template: missing '}}'" : "unexpected end of template: missing '%}'",
            start_line);
      if (depth == 0) {
        char sign = 0;
        size_t p = pos_;
        if (src_[p] == '-' || (src_[p] == '+' && !variable)) sign = src_[p++];
        if (p + 1 < src_.size() && src_[p] == close && src_[p + 1] == '}') {
          tokens_.push_back({variable ? TokenType::VarEnd : TokenType::BlockEnd, "", line_});
          advance_to(p + 2);
          after_end(sign, !variable);
          return;
        }
      }
      const char c = src_[pos_];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t p = pos_;
        while (p < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[p])) || src_[p] == '_')) ++p;
        tokens_.push_back({TokenType::Name, src_.substr(pos_, p - pos_), line_});
        advance_to(p);
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        number();
      } else if (c == '\'' || c == '"') {
        string_literal(c);
      } else {
        op(depth);
      }
    }
  }

  void number() {
    size_t p = pos_;
    auto digits = [&] {
      while (p < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[p])) || src_[p] == '_')) ++p;
    };
    digits();
    bool is_float = false;
    if (p + 1 < src_.size() && src_[p] == '.' && std::isdigit(static_cast<unsigned char>(src_[p + 1]))) {
      is_float = true;
      ++p;
      digits();
    }
    if (p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
      size_t q = p + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && std::isdigit(static_cast<unsigned char>(src_[q]))) {
        is_float = true;
        p = q;
        digits();
      }
    }
    std::string text = src_.substr(pos_, p - pos_);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    tokens_.push_back({is_float ? TokenType::Float : TokenType::Integer, text, line_});
    advance_to(p);
  }

  void string_literal(char quote) {
    const int start_line = line_;
    size_t p = pos_ + 1;
    while (p < src_.size() && src_[p] != quote) p += src_[p] == '\\' ? 2 : 1;
    if (p >= src_.size()) throw TemplateError("unterminated string literal", start_line);
    tokens_.push_back(
        {TokenType::String, unescape(std::string_view(src_).substr(pos_ + 1, p - pos_ - 1), start_line), start_line});
    advance_to(p + 1);
  }

  void op(int& depth) {
    static const char* const two[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* o : two) {
      if (src_.compare(pos_, 2, o) == 0) {
        tokens_.push_back({TokenType::Operator, o, line_});
        advance_to(pos_ + 2);
        return;
      }
    }
    const char c = src_[pos_];
    if (std::string_view("+-*/%~<>=()[]{},.:|").find(c) == std::string_view::npos)
      throw TemplateError(fmt::format("unexpected character '{}'", c), line_);
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') {
      if (depth == 0) throw TemplateError(fmt::format("unexpected '{}'", c), line_);
      --depth;
    }
    tokens_.push_back({TokenType::Operator, std::string(1, c), line_});
    advance_to(pos_ + 1);
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) { return Lexer(normalise_newlines(source)).run(); }

}  // namespace kvslim::jinja
