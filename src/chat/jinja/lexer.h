// Splits Jinja source into text and tag tokens, applying whitespace control as Jinja2 does with
// trim_blocks and lstrip_blocks on: `-` strips all whitespace on its side, `+` keeps it, a block
// or comment tag eats the newline after it and the indentation before it when alone on a line.
// The source's newlines are normalised to \n and one trailing newline is dropped (Jinja2's
// keep_trailing_newline=False).
#pragma once

#include <string>
#include <vector>

namespace kvslim::jinja {

enum class TokenType {
  Text,        // template data, already whitespace-controlled
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,
  String,  // value unescaped
  Integer,
  Float,
  Operator,  // + - * / // % ** ~ == != < > <= >= = ( ) [ ] { } , . : |
  End,
};

struct Token {
  TokenType type;
  std::string value;
  int line;
};

// Throws TemplateError (with the line) for an unterminated tag, comment or string.
std::vector<Token> tokenize(const std::string& source);

}  // namespace kvslim::jinja
