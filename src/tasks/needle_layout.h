// Tasks whose context is an instruction followed by a haystack with needle sentences between its
// sentences (the NIAH family, passkey, variable tracking): placing the needles and sizing the
// haystack to the requested number of tokens.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tasks/haystack.h"
#include "tasks/rng.h"
#include "tasks/task.h"

namespace kvslim::tasks {

struct NeedleLayout {
  std::string intro;                 // opens the context; ends with a newline
  std::vector<std::string> needles;  // in context order
  // Where each needle goes, in percent of the haystack's sentence boundaries (non-decreasing;
  // RULER's insertion rule: boundary = floor(sentences * percent / 100)). Ignored with `depth`.
  std::vector<int> percents;
  // A single needle placed so that the fraction of the context's other tokens before it is
  // `depth`, to the nearest sentence boundary (the intro always precedes it).
  std::optional<double> depth;
  std::string question;
  std::string answer_prefix;
  std::vector<std::string> answers;
  int max_new_tokens = 32;
};

// The sample for `layout` on `haystack`, its prompt target_tokens long within 1%.
TaskSample build_needle_sample(const std::string& task, int64_t target_tokens, const NeedleLayout& layout,
                               Haystack& haystack, const Tokenizer& tokenizer);

// RULER's needle depths: 40 percentages evenly spaced over [0, 100], rounded.
int depth_percent(size_t index);
constexpr size_t kDepthCount = 40;

// `count` distinct depth percentages drawn from RULER's grid, in increasing order.
std::vector<int> draw_percents(Rng& rng, size_t count);

// The requested depth, or one drawn from RULER's grid when none was given.
double depth_or_drawn(std::optional<double> depth, Rng& rng);

}  // namespace kvslim::tasks
