// The dense training tasks (train/dense_tasks.h): every answer the loss is on is what the text
// says, found by parsing the decoded text on its own (a needle table for recall, assignments
// resolved for chains), and each sequence fits its length and the stream.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <regex>

#include "gguf/gguf.h"
#include "train/data_stream.h"
#include "train/dense_tasks.h"
#include "util/error.h"

namespace kvslim::train {
namespace {

const Tokenizer& model_tokenizer() {
  static const Tokenizer tokenizer =
      Tokenizer::from_gguf(gguf::File::open(KVSLIM_SOURCE_DIR "/models/kvslim-small.gguf"));
  return tokenizer;
}

// The decoded text before each answer and the answers themselves (the runs of weight-1 tokens
// before the EOS).
struct Decoded {
  std::vector<std::string> before;  // the text from the previous answer to this one
  std::vector<std::string> answers;
};

Decoded split_answers(const TrainSequence& seq, const Tokenizer& tok) {
  Decoded out;
  std::vector<int32_t> run;
  bool in_answer = false;
  const size_t body = seq.tokens.size() - 1;  // the EOS last
  for (size_t t = 0; t <= body; ++t) {
    const bool answer = t < body && seq.weights[t] == 1.0f;
    if (t == body || answer != in_answer) {
      (in_answer ? out.answers : out.before).push_back(tok.decode(run));
      run.clear();
      in_answer = answer;
    }
    if (t < body) run.push_back(seq.tokens[t]);
  }
  return out;
}

// Checks recall-style sequences of `task` over 12 seeds; counts those with UUID values.
void check_recall_sequences(const std::string& task, int& uuid_sequences) {
  const Tokenizer& tok = model_tokenizer();
  const std::regex needle(R"(One of the special magic (numbers|uuids) for ([a-z]+-[a-z]+) is: ([0-9a-f-]+)\.)");
  const std::regex asked(R"(special magic (number|uuid) for ([a-z]+-[a-z]+) mentioned in the provided text is$)");
  int questions = 0;
  uuid_sequences = 0;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    const int64_t length = 512 + int64_t(seed) * 300;
    const TrainSequence seq = dense_sequence(task, seed, length, tok, 0.05f);
    ASSERT_EQ(seq.tokens.size(), seq.weights.size());
    EXPECT_LE(int64_t(seq.tokens.size()) - 1, length);
    EXPECT_GE(int64_t(seq.tokens.size()) - 1, length * 8 / 10) << "the haystack fills the length";
    EXPECT_EQ(seq.tokens.back(), tok.eos_id());
    EXPECT_EQ(seq.weights.back(), 1.0f);

    const Decoded d = split_answers(seq, tok);
    std::map<std::string, std::string> values;
    const std::string& context = d.before[0];
    for (auto it = std::sregex_iterator(context.begin(), context.end(), needle); it != std::sregex_iterator(); ++it) {
      ASSERT_TRUE(values.emplace((*it)[2], (*it)[3]).second) << "a key is used twice: " << (*it)[2];
      uuid_sequences += (*it)[1] == "uuids" && values.size() == 1;
    }
    ASSERT_GE(values.size(), 3u);
    ASSERT_EQ(d.answers.size(), d.before.size()) << "the sequence ends on an answer";
    ASSERT_GE(d.answers.size(), 1u);
    std::set<std::string> keys_asked;
    for (size_t q = 0; q < d.answers.size(); ++q) {
      std::smatch m;
      ASSERT_TRUE(std::regex_search(d.before[q], m, asked)) << d.before[q];
      ASSERT_TRUE(keys_asked.insert(m[2]).second) << "asked twice: " << m[2];
      ASSERT_TRUE(values.count(m[2])) << "asked about a key with no needle: " << m[2];
      EXPECT_EQ(d.answers[q], " " + values[m[2]]);
      ++questions;
    }
  }
  EXPECT_GT(questions, 12 * 2) << "dense: several questions per sequence";
}

TEST(DenseTasks, RecallAnswersAreTheValuesOfTheAskedKeys) {
  int uuid_sequences = 0;
  check_recall_sequences(kRecallTask, uuid_sequences);
  EXPECT_GT(uuid_sequences, 0);
  EXPECT_LT(uuid_sequences, 12);
}

TEST(DenseTasks, RecallUuidsAsksOnlyUuids) {
  int uuid_sequences = 0;
  check_recall_sequences(kRecallUuidsTask, uuid_sequences);
  EXPECT_EQ(uuid_sequences, 12);
}

TEST(DenseTasks, ChainsAnswersAreEveryVariableHoldingTheValueInOrder) {
  const Tokenizer& tok = model_tokenizer();
  const std::regex assignment(R"(VAR ([A-Z]{5}) = (VAR ([A-Z]{5})|([0-9]{5}))\.)");
  const std::regex asked(R"(assigned the value ([0-9]{5}), they are: $)");
  for (uint64_t seed = 0; seed < 8; ++seed) {
    const int64_t length = 512 + int64_t(seed) * 400;
    const TrainSequence seq = dense_sequence(kChainsTask, seed, length, tok, 0.0f);
    EXPECT_LE(int64_t(seq.tokens.size()) - 1, length);
    const Decoded d = split_answers(seq, tok);
    // Resolve every variable to its value by following the assignments as written.
    std::map<std::string, std::string> source;
    std::vector<std::string> order;
    const std::string& context = d.before[0];
    for (auto it = std::sregex_iterator(context.begin(), context.end(), assignment); it != std::sregex_iterator();
         ++it) {
      ASSERT_TRUE(source.emplace((*it)[1], (*it)[3].matched ? std::string((*it)[3]) : std::string((*it)[4])).second);
      order.push_back((*it)[1]);
    }
    const auto value_of = [&](std::string name) {
      for (int hops = 0; source.count(name); ++hops) {
        EXPECT_LT(hops, 10) << "a cycle";
        name = source[name];
      }
      return name;
    };
    ASSERT_EQ(d.answers.size(), order.size() / 5) << "every chain asked once";
    for (size_t q = 0; q < d.answers.size(); ++q) {
      std::smatch m;
      ASSERT_TRUE(std::regex_search(d.before[q], m, asked)) << d.before[q];
      std::string expected;
      for (const std::string& name : order)
        if (value_of(name) == m[1]) expected += (expected.empty() ? "" : ", ") + name;
      EXPECT_EQ(d.answers[q], expected);
      EXPECT_EQ(std::count(expected.begin(), expected.end(), ','), 4);
    }
  }
}

TEST(DenseTasks, AreDeterministicMixWithTheStreamAndRefuseBadInput) {
  const Tokenizer& tok = model_tokenizer();
  const auto recall = [&](uint64_t seed) { return dense_sequence(kRecallTask, seed, 1024, tok, 0.1f).tokens; };
  EXPECT_EQ(recall(5), recall(5));
  EXPECT_NE(recall(5), recall(6));
  EXPECT_THROW(dense_sequence(kRecallTask, 1, kDenseMinTokens - 1, tok, 0.1f), Error);
  EXPECT_THROW(dense_sequence("recal", 1, 1024, tok, 0.1f), Error);
  EXPECT_EQ(task_min_tokens(kChainsTask), kDenseMinTokens);

  const DataStream stream(tok, parse_task_mix("recall:1,chains:1,passkey:1"), 0.1f, 3, 4096);
  std::map<std::string, int> seen;
  for (uint64_t i = 0; i < 60; ++i) {
    const DataStream::SampleSpec s = stream.spec(i, 1024);
    ++seen[s.task];
    if (s.task != "passkey") {
      const TrainSequence seq = stream.sample(i, 1024);
      EXPECT_LE(int64_t(seq.tokens.size()) - 1, s.target_tokens);
      EXPECT_NE(stream.sample_text(i, 1024).find(s.task == "recall" ? "special magic" : "VAR "), std::string::npos);
    }
  }
  EXPECT_GT(seen["recall"], 0);
  EXPECT_GT(seen["chains"], 0);
}

}  // namespace
}  // namespace kvslim::train
