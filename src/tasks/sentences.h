// The fixed sentences of the NIAH and variable-tracking tasks (RULER's templates), in one place
// so that the training-only dense tasks (train/dense_tasks.h) ask exactly what evaluation asks.
#pragma once

#include <string>

namespace kvslim::tasks::sentences {

// NIAH. `kind` is "number" or "uuid"; `kinds` its plural.
std::string niah_needle(const std::string& kinds, const std::string& key, const std::string& value);
std::string niah_intro_one(const std::string& kind);    // one value will be asked for
std::string niah_intro_many(const std::string& kinds);  // several values
std::string niah_question_one(const std::string& kind, const std::string& query);
std::string niah_answer_prefix_one(const std::string& kind, const std::string& query);

// Variable tracking.
std::string vt_intro();
std::string vt_assign_value(const std::string& name, const std::string& value);
std::string vt_assign_variable(const std::string& name, const std::string& from);
std::string vt_question(const std::string& value);
std::string vt_answer_prefix(int variables, const std::string& value);

}  // namespace kvslim::tasks::sentences
