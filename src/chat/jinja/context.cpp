#include "chat/jinja/context.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace kvslim::jinja {

Value CallArgs::get(size_t position, const char* name, Value fallback) const {
  if (position < positional.size()) return positional[position];
  for (const auto& [key, value] : keyword)
    if (key == name) return value;
  return fallback;
}

void CallArgs::expect(const char* function, size_t max_positional, std::initializer_list<const char*> names) const {
  if (positional.size() > max_positional)
    raise(fmt::format("{}() takes at most {} positional argument{} ({} given)", function, max_positional,
                      max_positional == 1 ? "" : "s", positional.size()));
  for (const auto& entry : keyword)
    if (std::none_of(names.begin(), names.end(), [&](const char* n) { return entry.first == n; }))
      raise(fmt::format("{}() got an unexpected keyword argument '{}'", function, entry.first));
}

Value Context::lookup(const std::string& name) const {
  for (const Frame* f = frame_; f; f = f->parent) {
    const auto it = f->vars.find(name);
    if (it != f->vars.end()) return it->second;
  }
  return Value::undefined(fmt::format("'{}' is undefined", name));
}

void Context::write(const std::string& s) {
  if (out_->size() + s.size() > limits_.max_string_bytes) produced(out_->size() + s.size());
  step(s.size() / 32);
  *out_ += s;
}

void Context::step(uint64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps)
    raise(fmt::format("the template did too much work (over {} steps); is it looping?", limits_.max_steps));
}

void Context::produced(size_t bytes) {
  if (bytes > limits_.max_string_bytes)
    raise(fmt::format("the template built a string of over {} MiB", limits_.max_string_bytes >> 20));
  step(bytes / 32);
}

std::tm Context::now() const {
  if (clock_) return clock_();
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm local{};
  localtime_r(&t, &local);
  return local;
}

Context::~Context() {
  for (const auto& d : namespaces_) {
    d->entries.clear();
    d->index.clear();
  }
}

}  // namespace kvslim::jinja
