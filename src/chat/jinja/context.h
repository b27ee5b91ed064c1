// The state of one rendering: variable frames, the output being written, and the budget that
// stops a hostile template (the server renders users' templates) from hanging the process,
// exhausting memory or overflowing the stack.
#pragma once

#include <ctime>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "chat/jinja/value.h"

namespace kvslim::jinja {

// Arguments of a call, filter, test or method: positional, then keyword.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // The argument at `position` or named `name`; `fallback` when absent.
  Value get(size_t position, const char* name, Value fallback = Value()) const;
  // Raises when more positional arguments than `max_positional` or an unknown keyword is given.
  void expect(const char* function, size_t max_positional, std::initializer_list<const char*> names = {}) const;
};

struct Limits {
  // About a second of work: a node evaluated is one step, a loop iteration 16, 32 bytes built one.
  uint64_t max_steps = 10'000'000;
  uint64_t max_string_bytes = 64ull << 20;  // any one string or list (output included)
  int max_call_depth = 200;                 // macro recursion
};

class Context {
 public:
  struct Frame {
    std::unordered_map<std::string, Value> vars;
    Frame* parent = nullptr;
  };

  Context(Limits limits, std::function<std::tm()> clock) : limits_(limits), clock_(std::move(clock)) {}
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Every namespace() made while rendering. Namespaces are the one mutable kind of value, so the
  // one that can hold itself (`set ns.me = ns`: a cycle of shared_ptrs that would never be freed,
  // a leak per request the fuzzer found); the destructor empties them, which breaks every cycle.
  void track_namespace(std::shared_ptr<DictData> d) { namespaces_.push_back(std::move(d)); }

  Frame& root() { return root_; }
  Frame* frame() const { return frame_; }
  void set_frame(Frame* frame) { frame_ = frame; }

  // A name from the innermost frame outwards; undefined (hinting the name) when unknown.
  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value value) { frame_->vars[name] = std::move(value); }

  std::string& out() { return *out_; }
  void set_out(std::string* out) { out_ = out; }
  void write(const std::string& s);

  // Counts work; raises once the budget is spent.
  void step(uint64_t n = 1);
  // Counts a produced string (or list) of `bytes` against the budget and refuses oversized ones.
  void produced(size_t bytes);

  int& call_depth() { return call_depth_; }
  const Limits& limits() const { return limits_; }
  std::tm now() const;

 private:
  Limits limits_;
  std::function<std::tm()> clock_;
  Frame root_;
  Frame* frame_ = &root_;
  std::string* out_ = nullptr;
  uint64_t steps_ = 0;
  int call_depth_ = 0;
  std::vector<std::shared_ptr<DictData>> namespaces_;
};

// Runs `body` with a fresh frame whose parent is `parent`, restoring the current frame after.
template <class F>
auto with_frame(Context& ctx, Context::Frame* parent, F&& body) {
  Context::Frame frame;
  frame.parent = parent;
  Context::Frame* saved = ctx.frame();
  ctx.set_frame(&frame);
  struct Restore {
    Context& ctx;
    Context::Frame* saved;
    ~Restore() { ctx.set_frame(saved); }
  } restore{ctx, saved};
  return body();
}

// Runs `body` writing into `buffer` instead of the current output.
template <class F>
void capture(Context& ctx, std::string& buffer, F&& body) {
  std::string* saved = &ctx.out();
  ctx.set_out(&buffer);
  struct Restore {
    Context& ctx;
    std::string* saved;
    ~Restore() { ctx.set_out(saved); }
  } restore{ctx, saved};
  body();
}

}  // namespace kvslim::jinja
