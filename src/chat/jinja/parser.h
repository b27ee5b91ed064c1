// Tokens to the statement tree, following Jinja2's grammar and operator precedence:
// `a if c else b` < or < and < not < comparisons/in < + - < ~ < * / // % < ** < unary - <
// postfix (.attr [i] [a:b] (call)) and filters/tests (x | f, x is t).
#pragma once

#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/lexer.h"

namespace kvslim::jinja {

// Throws TemplateError carrying the line of the offending token.
Body parse(const std::vector<Token>& tokens);

}  // namespace kvslim::jinja
