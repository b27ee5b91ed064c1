// Synthetic evaluation tasks: prompt length in tokens, determinism, answers present and scorable,
// needle depth, the word-counting answers recounted independently, and bad requests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "tasks/haystack.h"
#include "tasks/sizing.h"
#include "tasks/task.h"
#include "prerequisites.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim::tasks {
namespace {

namespace fs = std::filesystem;

const Tokenizer& byte_tokenizer() {
  static const Tokenizer tokenizer = Tokenizer::from_gguf(gguf::File::open(testing::tiny_vocab()));
  return tokenizer;
}

// The Llama SentencePiece vocabulary from ../shared, when it is there.
const Tokenizer* llama_tokenizer() {
  static const std::optional<Tokenizer> tokenizer = []() -> std::optional<Tokenizer> {
    const fs::path path = testing::shared_dir() / "tokenizer-vectors" / "ggml-vocab-llama-spm.gguf";
    if (!fs::exists(path)) return std::nullopt;
    return Tokenizer::from_gguf(gguf::File::open(path.string()));
  }();
  return tokenizer ? &*tokenizer : nullptr;
}

int64_t count_prompt(const Tokenizer& tokenizer, const std::string& text) {
  return int64_t(tokenizer.encode(text, tokenizer.add_bos_by_default(), false).size());
}
int64_t count_text(const Tokenizer& tokenizer, const std::string& text) {
  return int64_t(tokenizer.encode(text, false, false).size());
}

std::vector<std::string> task_names() {
  std::vector<std::string> names;
  for (const TaskInfo& info : task_registry()) names.push_back(info.name);
  return names;
}

std::string all_answers(const TaskSample& sample) {
  std::string out;
  for (const std::string& answer : sample.answers) out += answer + ", ";
  return out;
}

TEST(EvalTaskRegistry, ListsTheThirteenTasksInOrder) {
  const std::vector<std::string> expected = {"niah_single_1",
                                             "niah_single_2",
                                             "niah_single_3",
                                             "niah_multikey_1",
                                             "niah_multikey_2",
                                             "niah_multikey_3",
                                             "niah_multivalue",
                                             "niah_multiquery",
                                             "vt",
                                             "cwe",
                                             "fwe",
                                             "passkey",
                                             "passkey64"};
  EXPECT_EQ(task_names(), expected);
  for (const TaskInfo& info : task_registry()) {
    const bool single = info.name.rfind("niah_single", 0) == 0 || info.name.rfind("passkey", 0) == 0;
    EXPECT_EQ(info.takes_depth, single) << info.name;
    EXPECT_EQ(&find_task(info.name), &find_task(info.name));
    EXPECT_EQ(find_task(info.name).min_tokens, info.min_tokens);
  }
}

class EvalTask : public ::testing::TestWithParam<std::string> {
 protected:
  const TaskInfo& info() const { return find_task(GetParam()); }

  // 512, 1024 and 2048 where the task can be built, and always its minimum.
  std::vector<int64_t> lengths() const {
    std::vector<int64_t> out = {info().min_tokens};
    for (const int64_t n : {512, 1024, 2048}) {
      if (n > info().min_tokens) out.push_back(n);
    }
    return out;
  }

  void expect_lengths(const Tokenizer& tokenizer) const {
    for (const int64_t target : lengths()) {
      for (const uint64_t seed : {1, 2}) {
        const TaskSample sample = make_sample(GetParam(), target, seed, tokenizer);
        const int64_t tokens = count_prompt(tokenizer, sample.prompt());
        EXPECT_LE(std::abs(tokens - target) * 100, target) << target << " tokens, seed " << seed << ": got " << tokens;
      }
    }
  }
};

TEST_P(EvalTask, PromptIsTheTargetLengthWithinOnePercentInByteTokens) { expect_lengths(byte_tokenizer()); }

TEST_P(EvalTask, PromptIsTheTargetLengthWithinOnePercentInLlamaTokens) {
  KVSLIM_REQUIRE(llama_tokenizer(), "no ggml-vocab-llama-spm.gguf in " << testing::shared_dir() / "tokenizer-vectors");
  expect_lengths(*llama_tokenizer());
}

TEST_P(EvalTask, IsDeterministicPerSeed) {
  const TaskSample a = make_sample(GetParam(), 1024 + 256, 7, byte_tokenizer());
  const TaskSample b = make_sample(GetParam(), 1024 + 256, 7, byte_tokenizer());
  const TaskSample c = make_sample(GetParam(), 1024 + 256, 8, byte_tokenizer());
  EXPECT_EQ(a.task, GetParam());
  EXPECT_EQ(a.target_tokens, 1024 + 256);
  EXPECT_EQ(a.seed, 7u);
  EXPECT_EQ(a.context, b.context);
  EXPECT_EQ(a.question, b.question);
  EXPECT_EQ(a.answer_prefix, b.answer_prefix);
  EXPECT_EQ(a.answers, b.answers);
  EXPECT_EQ(a.depth, b.depth);
  EXPECT_NE(a.context, c.context);
  EXPECT_NE(a.answers, c.answers);
}

TEST_P(EvalTask, AnswersAreInTheContextAndScorable) {
  for (const uint64_t seed : {3, 4, 5}) {
    const TaskSample sample = make_sample(GetParam(), 1536, seed, byte_tokenizer());
    ASSERT_FALSE(sample.answers.empty());
    for (const std::string& answer : sample.answers) {
      EXPECT_NE(sample.context.find(answer), std::string::npos) << answer;
      // The answer is asked for, not given away, after the context.
      EXPECT_EQ((sample.question + sample.answer_prefix).find(answer), std::string::npos) << answer;
    }
    if (llama_tokenizer()) {  // room to generate every answer, in a real model's tokens
      EXPECT_GE(sample.max_new_tokens, count_text(*llama_tokenizer(), all_answers(sample)));
    }
    EXPECT_EQ(score_output(sample, " " + all_answers(sample)), 1.0);
    EXPECT_EQ(partial_score(sample, " " + all_answers(sample)), 1.0);
    EXPECT_EQ(score_output(sample, ""), 0.0);
    EXPECT_EQ(partial_score(sample, ""), 0.0);
    EXPECT_EQ(sample.depth >= 0, info().takes_depth);
  }
}

TEST_P(EvalTask, BuildsAtItsMinimumWithOneTokenPerByte) {
  // The byte vocabulary spends a token on every byte, the most any tokenizer does on our text.
  for (uint64_t seed = 0; seed < 12; ++seed) {
    EXPECT_NO_THROW(make_sample(GetParam(), info().min_tokens, seed, byte_tokenizer())) << "seed " << seed;
  }
}

INSTANTIATE_TEST_SUITE_P(AllTasks, EvalTask, ::testing::ValuesIn(task_names()),
                         [](const auto& param) { return param.param; });

// Where the single needle sits in the context: [start, end) in bytes.
std::pair<size_t, size_t> needle_span(const TaskSample& sample) {
  const bool passkey = sample.task.rfind("passkey", 0) == 0;
  const std::string opening = passkey ? "The pass key is " : "One of the special magic";
  const std::string closing = passkey ? " is the pass key." : sample.answers[0] + ".";
  const size_t start = sample.context.find(opening);
  const size_t end = sample.context.find(closing, start) + closing.size();
  EXPECT_EQ(sample.context.find(opening, start + 1), std::string::npos) << "one needle only";
  return {start, end};
}

// Tokens of the longest haystack sentence of a context (after its first line, the instruction;
// sentences end with "." or a newline).
int64_t longest_sentence_tokens(const Tokenizer& tokenizer, const std::string& context) {
  int64_t longest = 0;
  size_t start = context.find('\n') + 1;
  while (start < context.size()) {
    size_t end = context.find_first_of(".\n", start);
    end = end == std::string::npos ? context.size() : end + 1;
    longest = std::max(longest, count_text(tokenizer, context.substr(start, end - start)));
    start = end;
  }
  return longest;
}

void expect_needle_at_depth(const std::string& task, const Tokenizer& tokenizer) {
  for (const double depth : {0.1, 0.25, 0.5, 0.75, 0.9}) {
    const TaskSample sample = make_sample(task, 2048, 11, tokenizer, depth);
    EXPECT_EQ(sample.depth, depth);
    const auto [start, end] = needle_span(sample);
    const std::string without = sample.context.substr(0, start) + sample.context.substr(end);
    const double before = double(count_text(tokenizer, sample.context.substr(0, start)));
    const double others = double(count_text(tokenizer, without));
    const double sentence = double(longest_sentence_tokens(tokenizer, without));
    EXPECT_NEAR(before, depth * others, sentence + 2) << task << " at depth " << depth;
  }
  // The ends: right after the instruction, and after the whole haystack.
  const TaskSample first = make_sample(task, 2048, 11, tokenizer, 0.0);
  EXPECT_EQ(needle_span(first).first, first.context.find('\n') + 1);
  const TaskSample last = make_sample(task, 2048, 11, tokenizer, 1.0);
  EXPECT_EQ(needle_span(last).second, last.context.size() - 1);
}

TEST(EvalTaskDepth, SingleNeedleSitsAtTheRequestedDepthInByteTokens) {
  for (const std::string task : {"niah_single_1", "niah_single_2", "niah_single_3", "passkey", "passkey64"}) {
    expect_needle_at_depth(task, byte_tokenizer());
  }
}

TEST(EvalTaskDepth, SingleNeedleSitsAtTheRequestedDepthInLlamaTokens) {
  KVSLIM_REQUIRE(llama_tokenizer(), "no ggml-vocab-llama-spm.gguf in " << testing::shared_dir() / "tokenizer-vectors");
  for (const std::string task : {"niah_single_2", "passkey"}) expect_needle_at_depth(task, *llama_tokenizer());
}

TEST(EvalTaskDepth, WithoutADepthOneIsDrawnFromTheSeed) {
  std::set<double> depths;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    const double depth = make_sample("niah_single_1", 1024, seed, byte_tokenizer()).depth;
    EXPECT_GE(depth, 0.0);
    EXPECT_LE(depth, 1.0);
    depths.insert(depth);
  }
  EXPECT_GT(depths.size(), 3u);
}

// Counts of each word, most frequent first (ties: alphabetical).
std::vector<std::pair<std::string, int>> ranked(const std::map<std::string, int>& counts) {
  std::vector<std::pair<std::string, int>> out(counts.begin(), counts.end());
  std::stable_sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
  return out;
}

TEST(EvalTaskWords, CweAnswersAreTheTenMostFrequentListItems) {
  for (const int64_t target : {1280, 12000}) {  // both frequency regimes (below and above 800 items)
    const TaskSample sample = make_sample("cwe", target, 5, byte_tokenizer());
    // The list is "1. w 2. w ..." on the context's second line; items must be numbered in order.
    const std::string list = sample.context.substr(sample.context.find('\n') + 1);
    const std::regex item(R"((\d+)\. (\S+))");
    std::map<std::string, int> counts;
    int expected_number = 1;
    for (auto it = std::sregex_iterator(list.begin(), list.end(), item); it != std::sregex_iterator(); ++it) {
      EXPECT_EQ(std::stoi((*it)[1]), expected_number++);
      ++counts[(*it)[2]];
    }
    const auto top = ranked(counts);
    ASSERT_GT(top.size(), 10u);
    std::set<std::string> top10;
    for (size_t i = 0; i < 10; ++i) top10.insert(top[i].first);
    EXPECT_EQ(top10, std::set<std::string>(sample.answers.begin(), sample.answers.end()));
    EXPECT_GT(top[9].second, top[10].second) << "the tenth word must beat the eleventh";
  }
}

TEST(EvalTaskWords, FweAnswersAreTheThreeMostFrequentCodedWords) {
  for (const int64_t target : {768, 4096}) {
    const TaskSample sample = make_sample("fwe", target, 6, byte_tokenizer());
    // Coded words are 6 lower-case letters; no word of the instruction is.
    std::map<std::string, int> counts;
    std::istringstream words(sample.context);
    for (std::string word; words >> word;) {
      if (std::regex_match(word, std::regex("[a-z]{6}"))) ++counts[word];
    }
    const auto top = ranked(counts);
    std::set<std::string> top3;
    for (size_t i = 0; i < 3; ++i) top3.insert(top[i].first);
    EXPECT_EQ(top3, std::set<std::string>(sample.answers.begin(), sample.answers.end()));
    EXPECT_GT(top[2].second, top[3].second) << "the third word must beat the fourth";
    EXPECT_GT(sample.context.find(" ... "), 0u);  // RULER's noise word is there to ignore
  }
}

// Every "for KEY is: VALUE." needle of a context.
std::vector<std::pair<std::string, std::string>> niah_needles(const std::string& context) {
  const std::regex needle(R"(One of the special magic (?:numbers|uuids) for (\S+) is: (\S+)\.)");
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it = std::sregex_iterator(context.begin(), context.end(), needle); it != std::sregex_iterator(); ++it) {
    out.emplace_back((*it)[1], (*it)[2]);
  }
  return out;
}

TEST(EvalTaskNiah, NeedlesMatchEachVariantsKeysAndValues) {
  const Tokenizer& tok = byte_tokenizer();
  // multikey_1: four keys, one asked; its value is the answer.
  {
    const TaskSample s = make_sample("niah_multikey_1", 2048, 3, tok);
    const auto needles = niah_needles(s.context);
    ASSERT_EQ(needles.size(), 4u);
    std::set<std::string> keys;
    int asked = 0;
    for (const auto& [key, value] : needles) {
      keys.insert(key);
      if (s.question.find(key) != std::string::npos) {
        ++asked;
        EXPECT_EQ(std::vector<std::string>{value}, s.answers);
      }
    }
    EXPECT_EQ(keys.size(), 4u);
    EXPECT_EQ(asked, 1);
  }
  // multivalue: one key, four values, all expected.
  {
    const TaskSample s = make_sample("niah_multivalue", 2048, 3, tok);
    const auto needles = niah_needles(s.context);
    ASSERT_EQ(needles.size(), 4u);
    std::set<std::string> values;
    for (const auto& [key, value] : needles) {
      EXPECT_EQ(key, needles[0].first);
      values.insert(value);
    }
    EXPECT_EQ(values, std::set<std::string>(s.answers.begin(), s.answers.end()));
    EXPECT_NE(s.question.find(needles[0].first), std::string::npos);
  }
  // multiquery: four keys, all asked, all values expected.
  {
    const TaskSample s = make_sample("niah_multiquery", 2048, 3, tok);
    const auto needles = niah_needles(s.context);
    ASSERT_EQ(needles.size(), 4u);
    std::set<std::string> values;
    for (const auto& [key, value] : needles) {
      EXPECT_NE(s.question.find(key), std::string::npos) << key;
      values.insert(value);
    }
    EXPECT_EQ(values, std::set<std::string>(s.answers.begin(), s.answers.end()));
  }
  // multikey_2 and _3: a haystack made of needles, keys all distinct, the asked one holds the answer.
  for (const std::string task : {"niah_multikey_2", "niah_multikey_3"}) {
    const TaskSample s = make_sample(task, 2048, 3, tok);
    const auto needles = niah_needles(s.context);
    ASSERT_GT(needles.size(), 10u) << task;
    std::set<std::string> keys;
    int asked = 0;
    for (const auto& [key, value] : needles) {
      keys.insert(key);
      if (s.question.find(key) != std::string::npos) {
        ++asked;
        EXPECT_EQ(std::vector<std::string>{value}, s.answers);
      }
    }
    EXPECT_EQ(keys.size(), needles.size()) << task;
    EXPECT_EQ(asked, 1) << task;
    const std::regex uuid("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
    EXPECT_EQ(std::regex_match(needles[0].first, uuid), task == "niah_multikey_3");
    EXPECT_EQ(std::regex_match(s.answers[0], uuid), task == "niah_multikey_3");
  }
  // Numbers have 7 digits.
  EXPECT_TRUE(std::regex_match(make_sample("niah_single_2", 1024, 3, tok).answers[0], std::regex("[1-9][0-9]{6}")));
}

TEST(EvalTaskVariableTracking, EveryAnswerResolvesToTheValueThroughTheChainInOrder) {
  const TaskSample s = make_sample("vt", 2048, 9, byte_tokenizer());
  const std::regex statement(R"(VAR ([A-Z]{5}) = (VAR ([A-Z]{5})|(\d{5}))\.)");
  std::map<std::string, std::string> value_of;
  std::vector<std::string> order;
  for (auto it = std::sregex_iterator(s.context.begin(), s.context.end(), statement); it != std::sregex_iterator();
       ++it) {
    const std::string source = (*it)[4].matched ? std::string((*it)[4]) : value_of.at((*it)[3]);  // defined before use
    value_of[(*it)[1]] = source;
    order.push_back((*it)[1]);
  }
  EXPECT_EQ(order, s.answers);
  ASSERT_EQ(order.size(), 5u);
  const std::string value = value_of[order[0]];
  for (const std::string& name : order) EXPECT_EQ(value_of[name], value);
  EXPECT_NE(s.question.find(value), std::string::npos);
}

TEST(EvalTaskScoring, ScoreIsTheFractionOfAnswersFoundIgnoringCase) {
  TaskSample sample;
  sample.task = "niah_multivalue";
  sample.answers = {"1234567", "abc-def", "7654321", "Zebra"};
  EXPECT_EQ(score_output(sample, "1234567, ABC-DEF and zebra"), 0.75);   // 3 of 4
  EXPECT_EQ(score_output(sample, "123456 abc def"), 0.0);                // near misses count for nothing
  EXPECT_EQ(partial_score(sample, "1234567, ABC-DEF and zebra"), 0.75);  // not a passkey: the same
  sample.answers.clear();
  EXPECT_THROW(score_output(sample, "x"), Error);
}

TEST(EvalTaskScoring, PasskeyPartialCreditCountsDigitsInPlaceInTheFirstDigitRun) {
  TaskSample sample;
  sample.task = "passkey";
  sample.answers = {"12345"};
  EXPECT_EQ(partial_score(sample, "The pass key is 12345."), 1.0);
  EXPECT_EQ(partial_score(sample, "It is 12945, or 12345"), 0.8);  // first run 12945: 4 digits in place
  EXPECT_EQ(partial_score(sample, "123"), 0.6);                    // 1, 2, 3 in place; 4 and 5 missing
  EXPECT_EQ(partial_score(sample, "x 2345"), 0.0);                 // shifted by one: nothing in place
  EXPECT_EQ(partial_score(sample, "no digits"), 0.0);
  EXPECT_EQ(score_output(sample, "It is 12945, or 12345"), 1.0);
  sample.task = "passkey64";
  sample.answers = {std::string(64, '7')};
  EXPECT_EQ(partial_score(sample, std::string(16, '7') + "x" + std::string(48, '7')), 0.25);
}

TEST(EvalTaskErrors, BadRequestsAreNamed) {
  const Tokenizer& tok = byte_tokenizer();
  const auto message = [&](auto&& call) -> std::string {
    try {
      call();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  const std::string unknown = message([&] { make_sample("niah_single_9", 1024, 1, tok); });
  EXPECT_NE(unknown.find("unknown task 'niah_single_9'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("niah_single_1, niah_single_2"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("passkey64"), std::string::npos) << unknown;
  EXPECT_EQ(message([&] { find_task("nope"); }).find("unknown task 'nope'"), 0u);

  const std::string short_ = message([&] { make_sample("cwe", 1000, 1, tok); });
  EXPECT_NE(short_.find("at least 1280"), std::string::npos) << short_;

  for (const double depth : {-0.1, 1.5, std::nan("")}) {
    const std::string bad = message([&] { make_sample("passkey", 1024, 1, tok, depth); });
    EXPECT_NE(bad.find("outside [0, 1]"), std::string::npos) << bad;
  }
  const std::string no_depth = message([&] { make_sample("vt", 1024, 1, tok, 0.5); });
  EXPECT_NE(no_depth.find("vt: the task takes no depth"), std::string::npos) << no_depth;
}

TEST(EvalHaystack, NoiseIsRulersRepeatedSentencesCutToTheCharacter) {
  Haystack noise = Haystack::noise();
  const std::string ruler = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
  const std::vector<std::string_view> cut = noise.first_chars(int64_t(ruler.size()) + 1 + 9);
  EXPECT_EQ(join_with_insertions(cut, {}, " "), ruler + " The grass");
  ASSERT_EQ(cut.size(), 6u);
  EXPECT_EQ(cut[4], "There and back again.");
  EXPECT_EQ(cut[5], "The grass");
  EXPECT_TRUE(noise.first_chars(0).empty());
  EXPECT_EQ(noise.first_chars(20).size(), 1u);  // ends inside the separator: the first sentence only
}

TEST(EvalHaystack, InsertionsGoBeforeTheirBoundaryInOrder) {
  const std::vector<std::string_view> sentences = {"A.", "B.", "C."};
  EXPECT_EQ(join_with_insertions(sentences, {{0, "x"}, {2, "y"}, {2, "z"}, {3, "w"}}, " "), "x A. B. y z C. w");
  EXPECT_EQ(join_with_insertions({}, {{0, "x"}, {0, "y"}}, "\n"), "x\ny");
}

TEST(EvalHaystack, VariedSentencesAreVariedAndReproducible) {
  Haystack a = Haystack::varied(1), b = Haystack::varied(1), c = Haystack::varied(2);
  const auto text = [](Haystack& h) { return join_with_insertions(h.first_chars(20000), {}, " "); };
  const std::string first = text(a);
  EXPECT_EQ(first, text(b));
  EXPECT_NE(first, text(c));
  std::set<std::string_view> distinct;
  const std::vector<std::string_view> sentences = a.first_chars(20000);
  distinct.insert(sentences.begin(), sentences.end());
  EXPECT_GT(distinct.size(), sentences.size() * 95 / 100);  // hardly a repeat
  for (const std::string_view sentence : std::vector(sentences.begin(), sentences.end() - 1)) {
    EXPECT_TRUE(sentence[0] >= 'A' && sentence[0] <= 'Z') << sentence;
    EXPECT_EQ(sentence.back(), '.') << sentence;
    EXPECT_EQ(sentence.find_first_of("0123456789"), std::string_view::npos) << sentence;  // no stray numbers
  }
}

TEST(EvalSizing, ClosestCountAgreesWithAScanOverEveryCount) {
  // A near-linear count with an uneven step, like tokens of a growing text.
  const auto count = [](int64_t n) { return 3 * n + (n * n % 7) / 3 + 5; };
  int evaluations = 0;
  const auto counted = [&](int64_t n) {
    ++evaluations;
    return count(n);
  };
  for (const int64_t goal : {5, 6, 100, 1000, 2999, 3001}) {
    int64_t best = 0;
    for (int64_t n = 0; n <= 2000; ++n) {
      if (std::abs(count(n) - goal) < std::abs(count(best) - goal)) best = n;
    }
    evaluations = 0;
    const int64_t found = closest_count(counted, 0, 2000, 10, goal, 0);
    EXPECT_EQ(std::abs(count(found) - goal), std::abs(count(best) - goal)) << "goal " << goal;
    EXPECT_LE(evaluations, 16) << "goal " << goal;
  }
  // Past the upper limit the limit is the closest.
  EXPECT_EQ(closest_count(count, 0, 50, 10, 100000, 0), 50);
}

}  // namespace
}  // namespace kvslim::tasks
