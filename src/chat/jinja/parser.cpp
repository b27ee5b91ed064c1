#include "chat/jinja/parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <initializer_list>

#include "chat/jinja/builtins.h"

namespace kvslim::jinja {

namespace {

// Nesting beyond this (brackets, unary operators, blocks) is refused rather than recursed into,
// so a hostile template cannot overflow the stack.
constexpr int kMaxNesting = 128;

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  Body parse_template() {
    std::string end;
    Body body = parse_body({}, end);
    return body;
  }

 private:
  struct Nest {
    explicit Nest(Parser& p) : p(p) {
      if (++p.depth_ > kMaxNesting) p.fail(fmt::format("template nested more than {} levels deep", kMaxNesting));
    }
    ~Nest() { --p.depth_; }
    Parser& p;
  };

  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  int line() const { return cur().line; }
  void next() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  [[noreturn]] void fail(const std::string& msg) const { throw TemplateError(msg, line()); }

  bool is_op(const char* op) const { return cur().type == TokenType::Operator && cur().value == op; }
  bool is_name(const char* name) const { return cur().type == TokenType::Name && cur().value == name; }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case TokenType::Text: return "template text";
      case TokenType::VarBegin: return "'{{'";
      case TokenType::VarEnd: return "'}}'";
      case TokenType::BlockBegin: return "'{%'";
      case TokenType::BlockEnd: return "'%}'";
      case TokenType::End: return "end of template";
      case TokenType::String: return "a string";
      default: return "'" + t.value + "'";
    }
  }

  void expect_op(const char* op) {
    if (!is_op(op)) fail(fmt::format("expected '{}', got {}", op, describe(cur())));
    next();
  }
  std::string expect_name() {
    if (cur().type != TokenType::Name) fail(fmt::format("expected a name, got {}", describe(cur())));
    std::string n = cur().value;
    next();
    return n;
  }
  void expect_block_end() {
    if (cur().type != TokenType::BlockEnd) fail(fmt::format("expected '%}}', got {}", describe(cur())));
    next();
  }

  // Statements until a `{% tag %}` whose name is in `ends` (left unconsumed past its name, which
  // goes to `found`). With no ends, until the end of the template.
  Body parse_body(std::initializer_list<const char*> ends, std::string& found) {
    Nest nest(*this);
    Body body;
    while (true) {
      const Token& tok = cur();
      switch (tok.type) {
        case TokenType::End:
          if (ends.size() == 0) return body;
          fail(fmt::format("unexpected end of template: expected {{% {} %}}", *(ends.end() - 1)));
        case TokenType::Text:
          body.push_back(std::make_unique<TextStmt>(tok.line, tok.value));
          next();
          break;
        case TokenType::VarBegin: {
          auto out = std::make_unique<OutputStmt>(tok.line);
          next();
          out->expr = parse_tuple(true, false);
          if (cur().type != TokenType::VarEnd) fail(fmt::format("expected '}}}}', got {}", describe(cur())));
          next();
          body.push_back(std::move(out));
          break;
        }
        case TokenType::BlockBegin: {
          next();
          if (cur().type != TokenType::Name) fail(fmt::format("expected a tag name, got {}", describe(cur())));
          const std::string name = cur().value;
          if (std::any_of(ends.begin(), ends.end(), [&](const char* e) { return name == e; })) {
            found = name;
            next();
            return body;
          }
          body.push_back(parse_statement());
          break;
        }
        default: fail(fmt::format("unexpected {}", describe(tok)));
      }
    }
  }

  StmtPtr parse_statement() {
    const std::string name = cur().value;
    const int at = line();
    next();
    if (name == "if") return parse_if(at);
    if (name == "for") return parse_for(at);
    if (name == "set") return parse_set(at);
    if (name == "macro") return parse_macro(at);
    if (name == "filter") return parse_filter_block(at);
    if (name == "with") return parse_with(at);
    if (name == "generation") {
      auto block = std::make_unique<ScopeBlock>(at);
      expect_block_end();
      std::string found;
      block->body = parse_body({"endgeneration"}, found);
      expect_block_end();
      return block;
    }
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) fail(fmt::format("'{}' outside of a loop", name));
      expect_block_end();
      return std::make_unique<LoopControl>(at, name == "break" ? Flow::Break : Flow::Continue);
    }
    static const char* const closers[] = {"endif",   "endfor",        "endset", "endmacro", "endfilter",
                                          "endwith", "endgeneration", "elif",   "else",     "endraw"};
    if (std::any_of(std::begin(closers), std::end(closers), [&](const char* c) { return name == c; }))
      throw TemplateError(fmt::format("unexpected '{}' (no open block expects it here)", name), at);
    throw TemplateError(fmt::format("unknown or unsupported tag '{}'", name), at);
  }

  StmtPtr parse_if(int at) {
    auto stmt = std::make_unique<IfStmt>(at);
    ExprPtr cond = parse_expression();
    while (true) {
      expect_block_end();
      std::string found;
      Body body = parse_body({"elif", "else", "endif"}, found);
      stmt->branches.emplace_back(std::move(cond), std::move(body));
      if (found == "elif") {
        cond = parse_expression();
        continue;
      }
      if (found == "else") {
        expect_block_end();
        stmt->otherwise = parse_body({"endif"}, found);
      }
      expect_block_end();
      return stmt;
    }
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    const bool paren = is_op("(");
    if (paren) next();
    names.push_back(expect_name());
    while (is_op(",")) {
      next();
      if (cur().type != TokenType::Name) break;
      names.push_back(expect_name());
    }
    if (paren) expect_op(")");
    return names;
  }

  StmtPtr parse_for(int at) {
    auto stmt = std::make_unique<ForStmt>(at);
    stmt->targets = parse_targets();
    if (!is_name("in")) fail(fmt::format("expected 'in', got {}", describe(cur())));
    next();
    stmt->iterable = parse_tuple(false, false);
    if (is_name("if")) {
      next();
      stmt->condition = parse_expression();
    }
    if (is_name("recursive")) fail("recursive loops are not supported");
    expect_block_end();
    ++loop_depth_;
    std::string found;
    stmt->body = parse_body({"else", "endfor"}, found);
    --loop_depth_;
    if (found == "else") {
      expect_block_end();
      stmt->otherwise = parse_body({"endfor"}, found);
    }
    expect_block_end();
    return stmt;
  }

  StmtPtr parse_set(int at) {
    auto stmt = std::make_unique<SetStmt>(at);
    const int target_line = line();
    const std::string first = expect_name();
    if (is_op(".")) {
      next();
      stmt->namespace_object = std::make_unique<Name>(target_line, first);
      stmt->targets.push_back(expect_name());
    } else {
      stmt->targets.push_back(first);
      while (is_op(",")) {
        next();
        stmt->targets.push_back(expect_name());
      }
    }
    if (is_op("=")) {
      next();
      stmt->value = parse_tuple(true, false);
      expect_block_end();
      return stmt;
    }
    if (stmt->namespace_object || stmt->targets.size() != 1) fail("a block {% set %} assigns one name");
    while (is_op("|")) {
      next();
      stmt->block_filters.push_back(parse_filter(nullptr));
    }
    expect_block_end();
    std::string found;
    stmt->block = parse_body({"endset"}, found);
    expect_block_end();
    return stmt;
  }

  StmtPtr parse_macro(int at) {
    auto stmt = std::make_unique<MacroStmt>(at);
    stmt->name = expect_name();
    expect_op("(");
    while (!is_op(")")) {
      std::string param = expect_name();
      ExprPtr fallback;
      if (is_op("=")) {
        next();
        fallback = parse_expression();
      }
      stmt->params.emplace_back(std::move(param), std::move(fallback));
      if (!is_op(",")) break;
      next();
    }
    expect_op(")");
    expect_block_end();
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;  // a loop around the definition does not make break legal inside it
    std::string found;
    stmt->body = parse_body({"endmacro"}, found);
    loop_depth_ = saved_loops;
    if (cur().type == TokenType::Name && cur().value == stmt->name) next();
    expect_block_end();
    return stmt;
  }

  StmtPtr parse_with(int at) {
    auto block = std::make_unique<ScopeBlock>(at);
    block->new_frame = true;
    while (cur().type != TokenType::BlockEnd) {
      if (!block->assignments.empty()) expect_op(",");
      std::string target = expect_name();
      expect_op("=");
      block->assignments.emplace_back(std::move(target), parse_expression());
    }
    expect_block_end();
    std::string found;
    block->body = parse_body({"endwith"}, found);
    expect_block_end();
    return block;
  }

  StmtPtr parse_filter_block(int at) {
    auto stmt = std::make_unique<FilterBlock>(at);
    stmt->filters.push_back(parse_filter(nullptr));
    while (is_op("|")) {
      next();
      stmt->filters.push_back(parse_filter(nullptr));
    }
    expect_block_end();
    std::string found;
    stmt->body = parse_body({"endfilter"}, found);
    expect_block_end();
    return stmt;
  }

  // Expressions.
  ExprPtr parse_expression(bool with_conditional = true) {
    Nest nest(*this);
    return with_conditional ? parse_conditional() : parse_or();
  }

  // A bare comma list is a tuple (`{% set a, b = 1, 2 %}`, `{{ 1, 2 }}`).
  ExprPtr parse_tuple(bool with_conditional, bool explicit_parens) {
    const int at = line();
    std::vector<ExprPtr> items;
    bool tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (cur().type == TokenType::VarEnd || cur().type == TokenType::BlockEnd || is_op(")") ||
          (!explicit_parens && is_name("if") && !with_conditional))
        break;
      items.push_back(parse_expression(with_conditional));
      if (is_op(","))
        tuple = true;
      else
        break;
    }
    if (!tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) fail(fmt::format("expected an expression, got {}", describe(cur())));
    }
    auto list = std::make_unique<ListLiteral>(at);
    list->items = std::move(items);
    list->tuple = true;
    return list;
  }

  ExprPtr parse_conditional() {
    ExprPtr expr = parse_or();
    while (is_name("if")) {
      auto cond = std::make_unique<Conditional>(line());
      next();
      cond->condition = parse_or();
      cond->then = std::move(expr);
      if (is_name("else")) {
        next();
        cond->otherwise = parse_conditional();
      }
      expr = std::move(cond);
    }
    return expr;
  }

  ExprPtr binary(std::string op, ExprPtr left, ExprPtr right, int at) {
    auto b = std::make_unique<Binary>(at);
    b->op = std::move(op);
    b->left = std::move(left);
    b->right = std::move(right);
    return b;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      const int at = line();
      next();
      left = binary("or", std::move(left), parse_and(), at);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      const int at = line();
      next();
      left = binary("and", std::move(left), parse_not(), at);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      Nest nest(*this);
      auto u = std::make_unique<Unary>(line());
      next();
      u->op = "not";
      u->operand = parse_not();
      return u;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int at = line();
    ExprPtr first = parse_math1();
    std::vector<std::pair<std::string, ExprPtr>> rest;
    while (true) {
      std::string op;
      if (cur().type == TokenType::Operator && (cur().value == "==" || cur().value == "!=" || cur().value == "<" ||
                                                cur().value == ">" || cur().value == "<=" || cur().value == ">=")) {
        op = cur().value;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && peek().type == TokenType::Name && peek().value == "in") {
        op = "not in";
        next();
        next();
      } else {
        break;
      }
      rest.emplace_back(op, parse_math1());
    }
    if (rest.empty()) return first;
    auto c = std::make_unique<Compare>(at);
    c->first = std::move(first);
    c->rest = std::move(rest);
    return c;
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const std::string op = cur().value;
      const int at = line();
      next();
      left = binary(op, std::move(left), parse_concat(), at);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      const int at = line();
      next();
      left = binary("~", std::move(left), parse_math2(), at);
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = cur().value;
      const int at = line();
      next();
      left = binary(op, std::move(left), parse_pow(), at);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      const int at = line();
      next();
      left = binary("**", std::move(left), parse_unary(true), at);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    Nest nest(*this);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      auto u = std::make_unique<Unary>(line());
      u->op = cur().value;
      next();
      u->operand = parse_unary(false);
      node = std::move(u);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    Nest nest(*this);
    const Token& tok = cur();
    const int at = tok.line;
    switch (tok.type) {
      case TokenType::Name: {
        const std::string& n = tok.value;
        next();
        if (n == "true" || n == "True") return std::make_unique<Literal>(at, Value::boolean(true));
        if (n == "false" || n == "False") return std::make_unique<Literal>(at, Value::boolean(false));
        if (n == "none" || n == "None") return std::make_unique<Literal>(at, Value::none());
        return std::make_unique<Name>(at, n);
      }
      case TokenType::String: {
        std::string s;
        while (cur().type == TokenType::String) {  // adjacent literals concatenate
          s += cur().value;
          next();
        }
        return std::make_unique<Literal>(at, Value::string(std::move(s)));
      }
      case TokenType::Integer: {
        int64_t v = 0;
        const auto r = std::from_chars(tok.value.data(), tok.value.data() + tok.value.size(), v);
        if (r.ec != std::errc()) fail(fmt::format("integer literal {} is out of range", tok.value));
        next();
        return std::make_unique<Literal>(at, Value::integer(v));
      }
      case TokenType::Float: {
        const double v = std::strtod(tok.value.c_str(), nullptr);
        next();
        return std::make_unique<Literal>(at, Value::number(v));
      }
      case TokenType::Operator:
        if (tok.value == "(") {
          next();
          ExprPtr inner = parse_tuple(true, true);
          expect_op(")");
          return inner;
        }
        if (tok.value == "[") {
          next();
          auto list = std::make_unique<ListLiteral>(at);
          while (!is_op("]")) {
            list->items.push_back(parse_expression());
            if (!is_op(",")) break;
            next();
          }
          expect_op("]");
          return list;
        }
        if (tok.value == "{") {
          next();
          auto dict = std::make_unique<DictLiteral>(at);
          while (!is_op("}")) {
            ExprPtr key = parse_expression();
            expect_op(":");
            dict->entries.emplace_back(std::move(key), parse_expression());
            if (!is_op(",")) break;
            next();
          }
          expect_op("}");
          return dict;
        }
        break;
      default: break;
    }
    fail(fmt::format("unexpected {}", describe(tok)));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".")) {
        const int at = line();
        next();
        if (cur().type == TokenType::Integer) {  // x.0 is x[0]
          auto item = std::make_unique<GetItem>(at);
          item->object = std::move(node);
          item->index = parse_primary();
          node = std::move(item);
          continue;
        }
        auto attr = std::make_unique<GetAttr>(at);
        attr->object = std::move(node);
        attr->name = expect_name();
        node = std::move(attr);
      } else if (is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr object) {
    Nest nest(*this);
    const int at = line();
    next();  // [
    ExprPtr start;
    if (!is_op(":")) start = parse_expression();
    if (!is_op(":")) {
      expect_op("]");
      auto item = std::make_unique<GetItem>(at);
      item->object = std::move(object);
      item->index = std::move(start);
      return item;
    }
    auto slice = std::make_unique<SliceExpr>(at);
    slice->object = std::move(object);
    slice->start = std::move(start);
    next();  // :
    if (!is_op(":") && !is_op("]")) slice->stop = parse_expression();
    if (is_op(":")) {
      next();
      if (!is_op("]")) slice->step = parse_expression();
    }
    expect_op("]");
    return slice;
  }

  void parse_arguments(Arguments& args) {
    Nest nest(*this);
    expect_op("(");
    while (!is_op(")")) {
      if (cur().type == TokenType::Name && peek().type == TokenType::Operator && peek().value == "=") {
        std::string key = cur().value;
        next();
        next();
        args.keyword.emplace_back(std::move(key), parse_expression());
      } else {
        if (!args.keyword.empty()) fail("positional argument after keyword argument");
        args.positional.push_back(parse_expression());
      }
      if (!is_op(",")) break;
      next();
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto call = std::make_unique<Call>(line());
    call->callee = std::move(callee);
    parse_arguments(call->args);
    return call;
  }

  std::string dotted_name() {
    std::string name = expect_name();
    while (is_op(".") && peek().type == TokenType::Name) {
      next();
      name += '.';
      name += expect_name();
    }
    return name;
  }

  std::unique_ptr<FilterCall> parse_filter(ExprPtr input) {
    const int at = line();
    auto f = std::make_unique<FilterCall>(at);
    f->input = std::move(input);
    f->name = dotted_name();
    f->fn = find_filter(f->name);
    if (!f->fn) throw TemplateError(fmt::format("no filter named '{}'", f->name), at);
    if (is_op("(")) parse_arguments(f->args);
    return f;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        next();
        node = parse_filter(std::move(node));
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_test(ExprPtr input) {
    const int at = line();
    next();  // is
    auto t = std::make_unique<TestCall>(at);
    t->input = std::move(input);
    if (is_name("not")) {
      t->negated = true;
      next();
    }
    t->name = dotted_name();
    t->fn = find_test(t->name);
    if (!t->fn) throw TemplateError(fmt::format("no test named '{}'", t->name), at);
    if (is_op("(")) {
      parse_arguments(t->args);
    } else {
      const TokenType type = cur().type;
      static const char* const stop_words[] = {"else", "or", "and", "if", "is", "in", "not"};
      const bool starts_argument = type == TokenType::Name || type == TokenType::String || type == TokenType::Integer ||
                                   type == TokenType::Float || is_op("[") || is_op("{");
      const bool stop = type == TokenType::Name && std::any_of(std::begin(stop_words), std::end(stop_words),
                                                               [&](const char* w) { return cur().value == w; });
      if (starts_argument && !stop) t->args.positional.push_back(parse_postfix(parse_primary()));
    }
    return t;
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse(const std::vector<Token>& tokens) { return Parser(tokens).parse_template(); }

}  // namespace kvslim::jinja
