// RULER's string_match_all, and the passkey's partial credit.
#include <algorithm>
#include <cctype>

#include "tasks/task.h"
#include "util/error.h"

namespace kvslim::tasks {
namespace {

std::string lowered(const std::string& text) {
  std::string out = text;
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return out;
}

void require_answers(const TaskSample& sample) {
  if (sample.answers.empty()) fail("{}: the sample has no answers to score against", sample.task);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

double score_output(const TaskSample& sample, const std::string& output) {
  require_answers(sample);
  const std::string haystack = lowered(output);
  size_t found = 0;
  for (const std::string& answer : sample.answers) found += haystack.find(lowered(answer)) != std::string::npos;
  return double(found) / double(sample.answers.size());
}

double partial_score(const TaskSample& sample, const std::string& output) {
  if (sample.task != "passkey" && sample.task != "passkey64") return score_output(sample, output);
  require_answers(sample);
  const std::string& key = sample.answers[0];
  const auto start = std::find_if(output.begin(), output.end(), is_digit);
  const auto end = std::find_if_not(start, output.end(), is_digit);
  size_t matched = 0;
  for (size_t i = 0; i < key.size() && start + std::ptrdiff_t(i) < end; ++i)
    matched += start[std::ptrdiff_t(i)] == key[i];
  return double(matched) / double(key.size());
}

}  // namespace kvslim::tasks
