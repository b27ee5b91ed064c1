// The parsed template: expressions evaluate to a Value, statements write to the output. Each
// node knows its source line so errors can name it. Evaluation lives in eval_expr.cpp and
// eval_stmt.cpp; filters and tests are resolved by name at parse time (an unknown one is a
// syntax error, as in Jinja2).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja/context.h"
#include "chat/jinja/value.h"

namespace kvslim::jinja {

using FilterFn = Value (*)(const Value& input, CallArgs& args, Context& ctx);
using TestFn = bool (*)(const Value& input, CallArgs& args, Context& ctx);

struct Expr {
  explicit Expr(int line) : line(line) {}
  virtual ~Expr() = default;
  virtual Value eval(Context& ctx) const = 0;
  int line;
};
using ExprPtr = std::unique_ptr<Expr>;

// Evaluates `e`, giving errors raised inside it e's line when none is set yet.
Value evaluate(const Expr& e, Context& ctx);

struct Arguments {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  CallArgs eval(Context& ctx) const;
};

struct Literal : Expr {
  Literal(int line, Value v) : Expr(line), value(std::move(v)) {}
  Value eval(Context& ctx) const override;
  Value value;
};

struct ListLiteral : Expr {
  using Expr::Expr;
  Value eval(Context& ctx) const override;
  std::vector<ExprPtr> items;
  bool tuple = false;
};

struct DictLiteral : Expr {
  using Expr::Expr;
  Value eval(Context& ctx) const override;
  std::vector<std::pair<ExprPtr, ExprPtr>> entries;
};

struct Name : Expr {
  Name(int line, std::string n) : Expr(line), name(std::move(n)) {}
  Value eval(Context& ctx) const override;
  std::string name;
};

struct GetAttr : Expr {  // a.b: methods first, then items (Jinja2's getattr)
  using Expr::Expr;
  Value eval(Context& ctx) const override;
  ExprPtr object;
  std::string name;
};

struct GetItem : Expr {  // a[b]: items first, then methods (Jinja2's getitem)
  using Expr::Expr;
  Value eval(Context& ctx) const override;
  ExprPtr object, index;
};

struct SliceExpr : Expr {
  using Expr::Expr;
  Value eval(Context& ctx) const override;
  ExprPtr object, start, stop, step;  // null when omitted
};

struct Call : Expr {
  using Expr::Expr;
  Value eval(Context& ctx) const override;
  ExprPtr callee;
  Arguments args;
};

struct FilterCall : Expr {
  using Expr::Expr;
  Value eval(Context& ctx) const override;
  ExprPtr input;  // null inside a {% filter %} block
  std::string name;
  FilterFn fn = nullptr;
  Arguments args;
  Value apply(const Value& input, Context& ctx) const;
};

struct TestCall : Expr {
  using Expr::Expr;
  Value eval(Context& ctx) const override;
  ExprPtr input;
  std::string name;
  TestFn fn = nullptr;
  bool negated = false;
  Arguments args;
};

struct Unary : Expr {
  using Expr::Expr;
  Value eval(Context& ctx) const override;
  std::string op;  // "-", "+", "not"
  ExprPtr operand;
};

struct Binary : Expr {
  using Expr::Expr;
  Value eval(Context& ctx) const override;
  std::string op;  // + - * / // % ** ~ and or
  ExprPtr left, right;
};

struct Compare : Expr {  // a < b <= c: chained as Python does
  using Expr::Expr;
  Value eval(Context& ctx) const override;
  ExprPtr first;
  std::vector<std::pair<std::string, ExprPtr>> rest;  // == != < > <= >= in "not in"
};

struct Conditional : Expr {
  using Expr::Expr;
  Value eval(Context& ctx) const override;
  ExprPtr condition, then, otherwise;  // otherwise null: undefined
};

// Statements.
enum class Flow { Normal, Break, Continue };

struct Stmt {
  explicit Stmt(int line) : line(line) {}
  virtual ~Stmt() = default;
  virtual Flow exec(Context& ctx) const = 0;
  int line;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

Flow execute(const Body& body, Context& ctx);

struct TextStmt : Stmt {
  TextStmt(int line, std::string t) : Stmt(line), text(std::move(t)) {}
  Flow exec(Context& ctx) const override;
  std::string text;
};

struct OutputStmt : Stmt {
  using Stmt::Stmt;
  Flow exec(Context& ctx) const override;
  ExprPtr expr;
};

struct IfStmt : Stmt {
  using Stmt::Stmt;
  Flow exec(Context& ctx) const override;
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, elif...
  Body otherwise;
};

struct ForStmt : Stmt {
  using Stmt::Stmt;
  Flow exec(Context& ctx) const override;
  std::vector<std::string> targets;  // one name, or several to unpack
  ExprPtr iterable, condition;       // condition: `for x in xs if cond`
  Body body, otherwise;
};

struct SetStmt : Stmt {
  using Stmt::Stmt;
  Flow exec(Context& ctx) const override;
  std::vector<std::string> targets;  // names (several: unpack)
  ExprPtr namespace_object;          // set ns.attr = ...: the object; targets[0] is attr
  ExprPtr value;                     // null for {% set x %}...{% endset %}
  Body block;
  std::vector<std::unique_ptr<FilterCall>> block_filters;  // {% set x | f %}
};

struct MacroStmt : Stmt {
  using Stmt::Stmt;
  Flow exec(Context& ctx) const override;
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // default null: none given
  Body body;
};

struct FilterBlock : Stmt {
  using Stmt::Stmt;
  Flow exec(Context& ctx) const override;
  std::vector<std::unique_ptr<FilterCall>> filters;  // applied left to right
  Body body;
};

// {% with a = 1 %}...{% endwith %} (a fresh frame) and transformers' {% generation %}...
// {% endgeneration %} (marks the assistant's text for training masks; renders its body).
struct ScopeBlock : Stmt {
  using Stmt::Stmt;
  Flow exec(Context& ctx) const override;
  bool new_frame = false;
  std::vector<std::pair<std::string, ExprPtr>> assignments;
  Body body;
};

struct LoopControl : Stmt {
  LoopControl(int line, Flow f) : Stmt(line), flow(f) {}
  Flow exec(Context& ctx) const override;
  Flow flow;
};

}  // namespace kvslim::jinja
