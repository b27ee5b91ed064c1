// LongBench-format data: the reader's per-line errors, dataset metrics, prompt and scores.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "eval/longbench.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim::eval {
namespace {

const char* const kJsonl =
    R"({"context": "Paris is the capital of France.", "input": "What is the capital of France?", "answers": ["Paris"], "length": 6, "dataset": "hotpotqa", "_id": "x1"}
{"context": "broken
{"context": "c", "input": "q", "answers": "Paris", "length": 1, "dataset": "hotpotqa"}

{"context": "c", "input": "q", "answers": ["a"], "length": 1, "dataset": "hotpotqa_zh"}
{"context": "Q: Where? Type: Location", "input": "Where is Rome?", "answers": ["Location"], "length": 5, "dataset": "trec", "all_classes": ["Location", "Number"]}
{"context": "c", "input": "q", "answers": ["Location"], "length": 1, "dataset": "trec", "all_classes": null}
{"context": "Paragraph 1: x. Paragraph 2: y.", "input": "y", "answers": ["Paragraph 2"], "length": 6, "dataset": "passage_retrieval_en", "all_classes": null}
{"context": "c", "input": "q", "answers": ["a"], "dataset": "qasper"}
["not", "an", "object"]
)";

TEST(LongBench, ReaderLoadsGoodLinesAndNamesEachBadOne) {
  std::istringstream in(kJsonl);
  const LongBenchData data = read_longbench(in);
  ASSERT_EQ(data.samples.size(), 3u);
  EXPECT_EQ(data.samples[0].line, 1);
  EXPECT_EQ(data.samples[0].dataset, "hotpotqa");
  EXPECT_EQ(data.samples[0].context, "Paris is the capital of France.");
  EXPECT_EQ(data.samples[0].input, "What is the capital of France?");
  EXPECT_EQ(data.samples[0].answers, std::vector<std::string>{"Paris"});
  EXPECT_EQ(data.samples[0].length, 6);
  EXPECT_TRUE(data.samples[0].all_classes.empty());
  EXPECT_EQ(data.samples[1].line, 6);
  EXPECT_EQ(data.samples[1].all_classes, (std::vector<std::string>{"Location", "Number"}));
  EXPECT_EQ(data.samples[2].line, 8);

  ASSERT_EQ(data.errors.size(), 6u);
  EXPECT_EQ(data.errors[0].rfind("line 2: not valid JSON", 0), 0u) << data.errors[0];
  EXPECT_EQ(data.errors[1], "line 3: 'answers' must be an array of strings");
  EXPECT_EQ(data.errors[2].rfind("line 5: unknown LongBench dataset 'hotpotqa_zh' (known: narrativeqa, qasper,", 0), 0u)
      << data.errors[2];
  EXPECT_EQ(data.errors[3], "line 7: 'all_classes' is needed to score trec");
  EXPECT_EQ(data.errors[4], "line 9: 'length' must be a non-negative integer");
  EXPECT_EQ(data.errors[5], "line 10: expected a JSON object");
}

TEST(LongBench, ReaderReportsARetrievalAnswerWithoutAParagraph) {
  std::istringstream in(
      R"({"context": "c", "input": "q", "answers": ["3"], "length": 1, "dataset": "passage_retrieval_en"})");
  const LongBenchData data = read_longbench(in);
  EXPECT_TRUE(data.samples.empty());
  ASSERT_EQ(data.errors.size(), 1u);
  EXPECT_EQ(data.errors[0], "line 1: answer '3' names no paragraph (expected \"Paragraph N\")");
}

TEST(LongBench, ReadsAFileAndNamesAMissingOne) {
  const std::string path = testing::temp_path("longbench.jsonl");
  std::ofstream(path) << kJsonl;
  const LongBenchData data = read_longbench_file(path);
  EXPECT_EQ(data.samples.size(), 3u);
  EXPECT_EQ(data.errors.size(), 6u);
  try {
    read_longbench_file(path + ".missing");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("longbench.jsonl.missing"), std::string::npos) << e.what();
  }
}

TEST(LongBench, DatasetsMapToLongBenchsMetrics) {
  using M = LongBenchMetric;
  const std::vector<std::pair<std::string, M>> expected = {{"narrativeqa", M::QaF1},
                                                           {"qasper", M::QaF1},
                                                           {"multifieldqa_en", M::QaF1},
                                                           {"hotpotqa", M::QaF1},
                                                           {"2wikimqa", M::QaF1},
                                                           {"musique", M::QaF1},
                                                           {"gov_report", M::RougeL},
                                                           {"qmsum", M::RougeL},
                                                           {"multi_news", M::RougeL},
                                                           {"samsum", M::RougeL},
                                                           {"trec", M::Classification},
                                                           {"triviaqa", M::QaF1},
                                                           {"passage_retrieval_en", M::Retrieval},
                                                           {"passage_count", M::Count},
                                                           {"lcc", M::CodeSim},
                                                           {"repobench-p", M::CodeSim}};
  EXPECT_EQ(longbench_datasets().size(), expected.size());
  for (const auto& [name, metric] : expected) EXPECT_EQ(longbench_dataset(name).metric, metric) << name;
  EXPECT_EQ(longbench_dataset("gov_report").max_new_tokens, 512);
  EXPECT_THROW(longbench_dataset("dureader"), Error);
}

TEST(LongBench, PromptIsContextBlankLineInputAndAnswerCue) {
  LongBenchSample sample;
  sample.context = "Some text.";
  sample.input = "A question?";
  const LongBenchPrompt prompt = longbench_prompt(sample);
  EXPECT_EQ(prompt.context, "Some text.\n\n");
  EXPECT_EQ(prompt.question, "A question?\nAnswer:");
}

TEST(LongBench, ScoreIsTheDatasetMetricsBestOverAnswers) {
  LongBenchSample qa;
  qa.dataset = "hotpotqa";
  qa.answers = {"Eiffel Tower", "the tower"};
  // vs "Eiffel Tower": P = 1, R = 1/2, F1 = 2/3; vs "the tower" (normalised "tower"): 1.
  EXPECT_DOUBLE_EQ(longbench_score(qa, "Tower"), 1.0);
  EXPECT_DOUBLE_EQ(longbench_score(qa, "a big tower"), 2.0 / 3.0);  // [big tower]: best is "tower", P 1/2 R 1

  LongBenchSample trivia = qa;  // triviaqa scores the first line only
  trivia.dataset = "triviaqa";
  trivia.answers = {"London"};
  EXPECT_DOUBLE_EQ(longbench_score(trivia, "\nParis\nLondon"), 0.0);
  EXPECT_DOUBLE_EQ(longbench_score(trivia, "\n\nLondon\nParis"), 1.0);

  LongBenchSample trec;
  trec.dataset = "trec";
  trec.answers = {"Number"};
  trec.all_classes = {"Location", "Number"};
  EXPECT_DOUBLE_EQ(longbench_score(trec, "Number or Location"), 0.5);

  LongBenchSample count;
  count.dataset = "passage_count";
  count.answers = {"4"};
  EXPECT_DOUBLE_EQ(longbench_score(count, "4 of 8"), 0.5);

  LongBenchSample code;
  code.dataset = "lcc";
  code.answers = {"x = foo(2)"};
  EXPECT_DOUBLE_EQ(longbench_score(code, "x = foo(1)"), 0.9);

  LongBenchSample summary;
  summary.dataset = "gov_report";
  summary.answers = {"the cat lay on the mat"};
  EXPECT_NEAR(longbench_score(summary, "the cat sat on the mat"), 0.8, 1e-7);

  LongBenchSample unknown = qa;
  unknown.dataset = "vcsum";
  EXPECT_THROW(longbench_score(unknown, "x"), Error);
}

}  // namespace
}  // namespace kvslim::eval
