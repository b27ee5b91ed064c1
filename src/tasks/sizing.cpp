#include "tasks/sizing.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include "util/error.h"

namespace kvslim::tasks {

int64_t prompt_tokens(const Tokenizer& tokenizer, std::string_view text) {
  return int64_t(tokenizer.encode(text, tokenizer.add_bos_by_default(), false).size());
}

int64_t text_tokens(const Tokenizer& tokenizer, std::string_view text) {
  return int64_t(tokenizer.encode(text, false, false).size());
}

int64_t closest_count(const std::function<int64_t(int64_t)>& count, int64_t lo, int64_t hi, int64_t first_guess,
                      int64_t goal, int64_t slack) {
  // Invariant: count(a) < goal; once an upper end is known, count(b) >= goal.
  int64_t a = lo;
  int64_t fa = count(lo);
  if (fa >= goal || lo >= hi) return lo;
  const int64_t f_lo = fa;
  int64_t b = -1, fb = 0;
  int64_t n = std::clamp(first_guess, lo + 1, hi);
  int same_side = 0, last_side = 0;
  for (;;) {
    const int64_t fn = count(n);
    if (std::abs(fn - goal) <= slack) return n;
    const int side = fn < goal ? -1 : 1;
    if (side < 0) {
      a = n;
      fa = fn;
    } else {
      b = n;
      fb = fn;
    }
    same_side = side == last_side ? same_side + 1 : 0;
    last_side = side;
    if (b < 0) {
      if (a == hi) return hi;
      // No upper end yet: extrapolate the slope seen so far, aiming a little past the goal so the
      // next probe brackets it.
      const double slope = std::max(double(fa - f_lo) / double(a - lo), 1e-3);
      n = std::min(hi, a + std::max<int64_t>(1, int64_t(std::ceil(double(goal - fa) / slope * 1.02))));
      continue;
    }
    if (b - a <= 1) break;
    if (same_side >= 2) {
      n = a + (b - a) / 2;  // the secant keeps landing on one side: halve the bracket instead
    } else {
      n = a + std::llround(double(goal - fa) * double(b - a) / double(std::max<int64_t>(fb - fa, 1)));
    }
    n = std::clamp(n, a + 1, b - 1);
  }
  return goal - fa <= fb - goal ? a : b;
}

Fit fit_units(const std::string& task, const std::function<std::string(int64_t)>& prompt_of, const Tokenizer& tokenizer,
              int64_t target_tokens, int64_t min_units) {
  std::map<int64_t, int64_t> seen;  // the search may come back to a count it has tokenised
  const auto count = [&](int64_t units) {
    const auto it = seen.find(units);
    if (it != seen.end()) return it->second;
    return seen[units] = prompt_tokens(tokenizer, prompt_of(units));
  };
  // A unit is at least one character, and no tokenizer packs more than a few characters of our
  // text per token on average, so this bound is never the binding one for a reachable target.
  const int64_t max_units = min_units + 64 * target_tokens + 1024;
  // A short first probe measures tokens per unit; the second lands near the target.
  const int64_t first_probe = min_units + 64;
  const int64_t slack = target_tokens / 200;
  Fit fit;
  fit.units = closest_count(count, min_units, max_units, first_probe, target_tokens, slack);
  fit.tokens = count(fit.units);
  check_length(task, fit.tokens, target_tokens);
  return fit;
}

void check_length(const std::string& task, int64_t tokens, int64_t target_tokens) {
  if (std::abs(tokens - target_tokens) * 100 > target_tokens) {
    fail("{}: cannot build a prompt of {} tokens with this tokenizer (the closest has {} tokens)", task, target_tokens,
         tokens);
  }
}

}  // namespace kvslim::tasks
