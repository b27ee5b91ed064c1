// Execution of statements. Scoping follows Jinja2: `if` shares its frame, each loop iteration
// and each macro call gets a fresh one (so `set` inside a loop does not leak out; templates use
// namespace() for that), and a macro sees the template's top-level names and those around its
// definition.
#include <fmt/format.h>

#include "chat/jinja/ast.h"
#include "chat/jinja/builtins.h"

namespace kvslim::jinja {

Flow execute(const Body& body, Context& ctx) {
  for (const auto& stmt : body) {
    ctx.step();
    Flow flow;
    try {
      flow = stmt->exec(ctx);
    } catch (TemplateError& err) {
      if (err.line == 0) err.line = stmt->line;
      throw;
    }
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

Flow TextStmt::exec(Context& ctx) const {
  ctx.write(text);
  return Flow::Normal;
}

Flow OutputStmt::exec(Context& ctx) const {
  ctx.write(to_str(evaluate(*expr, ctx)));
  return Flow::Normal;
}

Flow IfStmt::exec(Context& ctx) const {
  for (const auto& [condition, body] : branches)
    if (evaluate(*condition, ctx).truthy()) return execute(body, ctx);
  return execute(otherwise, ctx);
}

namespace {

void bind_targets(Context& ctx, const std::vector<std::string>& targets, const Value& value) {
  if (targets.size() == 1) {
    ctx.assign(targets[0], value);
    return;
  }
  if (!value.is_list() && !value.is_string())
    raise(fmt::format("cannot unpack a {} into {} names", value.type_name(), targets.size()));
  const std::vector<Value> parts = iterate(value);
  if (parts.size() != targets.size())
    raise(fmt::format("cannot unpack {} values into {} names", parts.size(), targets.size()));
  for (size_t i = 0; i < targets.size(); ++i) ctx.assign(targets[i], parts[i]);
}

Value loop_object(const std::vector<Value>& items, size_t i, const Value& cycle) {
  const auto n = static_cast<int64_t>(items.size());
  const auto k = static_cast<int64_t>(i);
  auto d = std::make_shared<DictData>();
  d->set("index", Value::integer(k + 1));
  d->set("index0", Value::integer(k));
  d->set("revindex", Value::integer(n - k));
  d->set("revindex0", Value::integer(n - k - 1));
  d->set("first", Value::boolean(k == 0));
  d->set("last", Value::boolean(k == n - 1));
  d->set("length", Value::integer(n));
  d->set("depth", Value::integer(1));
  d->set("depth0", Value::integer(0));
  d->set("previtem", k > 0 ? items[i - 1] : Value::undefined("there is no previous item"));
  d->set("nextitem", k + 1 < n ? items[i + 1] : Value::undefined("there is no next item"));
  d->set("cycle", cycle);
  return Value::dict(std::move(d));
}

}  // namespace

Flow ForStmt::exec(Context& ctx) const {
  std::vector<Value> items = iterate(evaluate(*iterable, ctx));
  if (condition) {
    std::vector<Value> kept;
    for (const Value& item : items) {
      ctx.step();
      const bool keep = with_frame(ctx, ctx.frame(), [&] {
        bind_targets(ctx, targets, item);
        return evaluate(*condition, ctx).truthy();
      });
      if (keep) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) return execute(otherwise, ctx);
  // One loop.cycle for all iterations: it reads the current loop's index.
  const Value cycle = Value::callable("loop.cycle", [](CallArgs& args, Context& ctx) {
    if (args.positional.empty()) raise("loop.cycle() needs at least one argument");
    const Value loop = ctx.lookup("loop");
    const Value* index0 = loop.is_dict() ? loop.dict_data().find("index0") : nullptr;
    if (!index0) raise("loop.cycle() outside of its loop");
    return args.positional[static_cast<size_t>(index0->as_int()) % args.positional.size()];
  });
  for (size_t i = 0; i < items.size(); ++i) {
    ctx.step(16);  // the loop object and the frame
    const Flow flow = with_frame(ctx, ctx.frame(), [&] {
      bind_targets(ctx, targets, items[i]);
      ctx.assign("loop", loop_object(items, i, cycle));
      return execute(body, ctx);
    });
    if (flow == Flow::Break) break;
  }
  return Flow::Normal;
}

Flow SetStmt::exec(Context& ctx) const {
  Value v;
  if (value) {
    v = evaluate(*value, ctx);
  } else {
    std::string buffer;
    capture(ctx, buffer, [&] { execute(block, ctx); });
    v = Value::string(std::move(buffer));
    for (const auto& f : block_filters) v = f->apply(v, ctx);
  }
  if (namespace_object) {
    const Value ns = evaluate(*namespace_object, ctx);
    if (!ns.is_namespace())
      raise(fmt::format("cannot set attribute '{}' of a {} (only of a namespace())", targets[0], ns.type_name()));
    ns.namespace_data().set(targets[0], std::move(v));
    return Flow::Normal;
  }
  bind_targets(ctx, targets, v);
  return Flow::Normal;
}

Flow MacroStmt::exec(Context& ctx) const {
  const MacroStmt* self = this;
  // A macro defined inside a loop or macro sees the names around its definition (`loop`, the
  // loop variable): they are copied now, since those frames end before a later call may come.
  std::shared_ptr<Context::Frame> closure;
  if (ctx.frame() != &ctx.root()) {
    closure = std::make_shared<Context::Frame>();
    closure->parent = &ctx.root();
    for (const Context::Frame* f = ctx.frame(); f && f != &ctx.root(); f = f->parent)
      for (const auto& [key, value] : f->vars) closure->vars.emplace(key, value);  // inner frames win
  }
  ctx.assign(name, Value::callable(name, [self, closure](CallArgs& args, Context& ctx) {
               if (args.positional.size() > self->params.size())
                 raise(fmt::format("macro '{}' takes not more than {} argument(s)", self->name, self->params.size()));
               if (++ctx.call_depth() > ctx.limits().max_call_depth) {
                 --ctx.call_depth();
                 raise(fmt::format("macro calls nested more than {} deep", ctx.limits().max_call_depth));
               }
               struct Unwind {
                 Context& ctx;
                 ~Unwind() { --ctx.call_depth(); }
               } unwind{ctx};
               for (const auto& entry : args.keyword) {
                 bool known = false;
                 for (const auto& p : self->params) known |= p.first == entry.first;
                 if (!known) raise(fmt::format("macro '{}' has no argument named '{}'", self->name, entry.first));
               }
               return with_frame(ctx, closure ? closure.get() : &ctx.root(), [&] {
                 for (size_t i = 0; i < self->params.size(); ++i) {
                   const auto& [param, fallback] = self->params[i];
                   Value v = args.get(i, param.c_str());
                   if (i >= args.positional.size() && v.is_undefined() && fallback) v = evaluate(*fallback, ctx);
                   ctx.assign(param, std::move(v));
                 }
                 std::string buffer;
                 capture(ctx, buffer, [&] { execute(self->body, ctx); });
                 return Value::string(std::move(buffer));
               });
             }));
  return Flow::Normal;
}

Flow FilterBlock::exec(Context& ctx) const {
  std::string buffer;
  capture(ctx, buffer, [&] { execute(body, ctx); });
  Value v = Value::string(std::move(buffer));
  for (const auto& f : filters) v = f->apply(v, ctx);
  ctx.write(to_str(v));
  return Flow::Normal;
}

Flow ScopeBlock::exec(Context& ctx) const {
  if (!new_frame) return execute(body, ctx);
  std::vector<Value> values;  // evaluated in the enclosing frame, as Jinja2 does
  for (const auto& a : assignments) values.push_back(evaluate(*a.second, ctx));
  return with_frame(ctx, ctx.frame(), [&] {
    for (size_t i = 0; i < assignments.size(); ++i) ctx.assign(assignments[i].first, values[i]);
    return execute(body, ctx);
  });
}

Flow LoopControl::exec(Context&) const { return flow; }

}  // namespace kvslim::jinja
