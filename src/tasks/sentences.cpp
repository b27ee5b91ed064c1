#include "tasks/sentences.h"

#include <fmt/format.h>

namespace kvslim::tasks::sentences {

std::string niah_needle(const std::string& kinds, const std::string& key, const std::string& value) {
  return fmt::format("One of the special magic {} for {} is: {}.", kinds, key, value);
}

std::string niah_intro_one(const std::string& kind) {
  return fmt::format(
      "A special magic {0} is hidden within the following text. Make sure to memorize it. I will quiz you about the "
      "{0} afterwards.\n",
      kind);
}

std::string niah_intro_many(const std::string& kinds) {
  return fmt::format(
      "Some special magic {0} are hidden within the following text. Make sure to memorize it. I will quiz you about "
      "the {0} afterwards.\n",
      kinds);
}

std::string niah_question_one(const std::string& kind, const std::string& query) {
  return fmt::format("What is the special magic {} for {} mentioned in the provided text?", kind, query);
}

std::string niah_answer_prefix_one(const std::string& kind, const std::string& query) {
  return fmt::format(" The special magic {} for {} mentioned in the provided text is", kind, query);
}

std::string vt_intro() {
  return "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n";
}

std::string vt_assign_value(const std::string& name, const std::string& value) {
  return fmt::format("VAR {} = {}.", name, value);
}

std::string vt_assign_variable(const std::string& name, const std::string& from) {
  return fmt::format("VAR {} = VAR {}.", name, from);
}

std::string vt_question(const std::string& value) {
  return fmt::format("Question: Find all variables that are assigned the value {} in the text above.", value);
}

std::string vt_answer_prefix(int variables, const std::string& value) {
  return fmt::format(
      " Answer: According to the chain(s) of variable assignment in the text above, {} variables are assigned the "
      "value {}, they are: ",
      variables, value);
}

}  // namespace kvslim::tasks::sentences
