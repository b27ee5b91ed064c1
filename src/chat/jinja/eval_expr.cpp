// Evaluation of expressions.
#include <fmt/format.h>

#include "chat/jinja/access.h"
#include "chat/jinja/ast.h"
#include "chat/jinja/builtins.h"
#include "chat/jinja/operators.h"

namespace kvslim::jinja {

Value evaluate(const Expr& e, Context& ctx) {
  ctx.step();
  try {
    return e.eval(ctx);
  } catch (TemplateError& err) {
    if (err.line == 0) err.line = e.line;
    throw;
  }
}

CallArgs Arguments::eval(Context& ctx) const {
  CallArgs args;
  args.positional.reserve(positional.size());
  for (const auto& p : positional) args.positional.push_back(evaluate(*p, ctx));
  for (const auto& [key, value] : keyword) args.keyword.emplace_back(key, evaluate(*value, ctx));
  return args;
}

Value Literal::eval(Context&) const { return value; }

Value ListLiteral::eval(Context& ctx) const {
  std::vector<Value> values;
  values.reserve(items.size());
  for (const auto& item : items) values.push_back(evaluate(*item, ctx));
  return Value::list(std::move(values), tuple);
}

Value DictLiteral::eval(Context& ctx) const {
  auto data = std::make_shared<DictData>();
  for (const auto& [key_expr, value_expr] : entries) {
    const Value key = evaluate(*key_expr, ctx);
    if (!key.is_string())
      throw TemplateError(fmt::format("dict keys must be strings here, not {}", key.type_name()), key_expr->line);
    data->set(key.as_string(), evaluate(*value_expr, ctx));
  }
  return Value::dict(std::move(data));
}

Value Name::eval(Context& ctx) const { return ctx.lookup(name); }

Value GetAttr::eval(Context& ctx) const { return get_attribute(evaluate(*object, ctx), name); }

Value GetItem::eval(Context& ctx) const {
  const Value obj = evaluate(*object, ctx);
  return get_item(obj, evaluate(*index, ctx));
}

Value SliceExpr::eval(Context& ctx) const {
  const Value obj = evaluate(*object, ctx);
  Value a, b, c;
  if (start) a = evaluate(*start, ctx);
  if (stop) b = evaluate(*stop, ctx);
  if (step) c = evaluate(*step, ctx);
  return slice(obj, start ? &a : nullptr, stop ? &b : nullptr, step ? &c : nullptr);
}

Value Call::eval(Context& ctx) const {
  const Value fn = evaluate(*callee, ctx);
  CallArgs call_args = args.eval(ctx);
  return call_value(fn, call_args, ctx);
}

Value FilterCall::apply(const Value& in, Context& ctx) const {
  CallArgs call_args = args.eval(ctx);
  return fn(in, call_args, ctx);
}

Value FilterCall::eval(Context& ctx) const { return apply(evaluate(*input, ctx), ctx); }

Value TestCall::eval(Context& ctx) const {
  const Value in = evaluate(*input, ctx);
  CallArgs call_args = args.eval(ctx);
  return Value::boolean(fn(in, call_args, ctx) != negated);
}

Value Unary::eval(Context& ctx) const {
  const Value v = evaluate(*operand, ctx);
  if (op == "not") return Value::boolean(!v.truthy());
  if (op == "-") return negate(v);
  if (!v.is_number()) raise(fmt::format("bad operand type for unary +: '{}'", v.type_name()));
  return v;
}

Value Binary::eval(Context& ctx) const {
  Value l = evaluate(*left, ctx);
  // and/or return an operand, as Python's do.
  if (op == "and") return l.truthy() ? evaluate(*right, ctx) : l;
  if (op == "or") return l.truthy() ? l : evaluate(*right, ctx);
  return arithmetic(op, l, evaluate(*right, ctx), ctx);
}

Value Compare::eval(Context& ctx) const {
  Value l = evaluate(*first, ctx);
  for (const auto& [op, expr] : rest) {
    Value r = evaluate(*expr, ctx);
    if (!compare(op, l, r)) return Value::boolean(false);
    l = std::move(r);
  }
  return Value::boolean(true);
}

Value Conditional::eval(Context& ctx) const {
  if (evaluate(*condition, ctx).truthy()) return evaluate(*then, ctx);
  return otherwise ? evaluate(*otherwise, ctx) : Value::undefined("the condition was false and there is no else");
}

}  // namespace kvslim::jinja
