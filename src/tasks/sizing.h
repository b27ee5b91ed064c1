// Sizing prompts in tokens of the model's tokenizer: a task describes its prompt as a function
// of a unit count (characters of haystack, list items, words) and the search below finds the
// count whose prompt has the requested number of tokens, tokenising the whole prompt only a
// handful of times.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "tokenizer/tokenizer.h"

namespace kvslim::tasks {

// Tokens the model sees for `text` as a prompt: with BOS when the tokenizer adds one by default.
int64_t prompt_tokens(const Tokenizer& tokenizer, std::string_view text);
// Tokens of `text` as a piece of a prompt: no BOS.
int64_t text_tokens(const Tokenizer& tokenizer, std::string_view text);

// The n in [lo, hi] whose count(n) is closest to `goal` (the smaller n on a tie), for a count
// that grows with n, if not strictly (tokenisation is not exactly additive). Secant steps inside
// a shrinking bracket, bisecting when they stall, so a near-linear count needs a few
// evaluations; `first_guess` is the first probe, and any n whose count is within `slack` of
// the goal is accepted at once.
int64_t closest_count(const std::function<int64_t(int64_t)>& count, int64_t lo, int64_t hi, int64_t first_guess,
                      int64_t goal, int64_t slack);

struct Fit {
  int64_t units = 0;
  int64_t tokens = 0;  // prompt tokens at that unit count
};

// The unit count (at least min_units) whose prompt_of(units) is closest to target_tokens,
// accepting anything within half a percent. Throws kvslim::Error naming `task` when no count
// comes within 1% of the target (the fixed text alone is too long for this tokenizer).
Fit fit_units(const std::string& task, const std::function<std::string(int64_t)>& prompt_of, const Tokenizer& tokenizer,
              int64_t target_tokens, int64_t min_units);

// Throws kvslim::Error naming `task` unless `tokens` is within 1% of the target.
void check_length(const std::string& task, int64_t tokens, int64_t target_tokens);

}  // namespace kvslim::tasks
