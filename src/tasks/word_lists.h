// Our own English word lists for the varied haystack, needle keys and word-counting tasks.
// The words of adjectives(), nouns() and verbs_past() are short (at most 8 letters), lower case,
// and no word appears in two of those lists.
#pragma once

#include <string>
#include <vector>

#include "tasks/rng.h"

namespace kvslim::tasks::words {

const std::vector<std::string>& adjectives();
const std::vector<std::string>& nouns();       // singular, concrete
const std::vector<std::string>& verbs_past();  // transitive, simple past
const std::vector<std::string>& places();      // read after "the"
const std::vector<std::string>& names();       // capitalised first names
const std::vector<std::string>& times();       // time phrases that can end a sentence
const std::vector<std::string>& degrees();     // adverbs that modify an adjective
const std::vector<std::string>& prepositions();

// "adjective-noun", RULER's kind of needle key (about 24,000 combinations).
std::string adjective_noun(Rng& rng);

}  // namespace kvslim::tasks::words
