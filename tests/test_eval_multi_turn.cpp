// eval --protocol multi-turn: a niah_multiquery sample is asked its four keys one per turn in one
// session, one record per turn (TASK/turnN), each scored against its own key's value; a task
// without turns is refused by name.
#include <gtest/gtest.h>

#include <fstream>

#include "cli_helpers.h"
#include "eval/results.h"
#include "model/model.h"
#include "tasks/task.h"

namespace kvslim::testing {
namespace {

TEST(EvalMultiTurn, NiahMultiqueryHasOneTurnPerKeyWithItsOwnAnswer) {
  const auto model = Model::load(make_model(TinyModel{}));
  const tasks::TaskSample s = tasks::make_sample("niah_multiquery", 800, 3, model->tokenizer());
  ASSERT_EQ(s.turns.size(), 4u);
  std::vector<std::string> all;
  for (const tasks::TaskTurn& t : s.turns) {
    ASSERT_EQ(t.answers.size(), 1u);
    all.push_back(t.answers[0]);
    EXPECT_NE(s.context.find(t.answers[0]), std::string::npos);  // the needle is in the context
    EXPECT_NE(s.question.find(t.question.substr(t.question.find(" for ") + 5, 5)), std::string::npos)
        << "the turn asks one of the sample's keys";
  }
  std::sort(all.begin(), all.end());
  std::vector<std::string> expected = s.answers;
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(all, expected);
  EXPECT_TRUE(tasks::make_sample("passkey", 800, 3, model->tokenizer()).turns.empty());
}

TEST(EvalMultiTurn, OneRecordPerTurnAndTasksWithoutTurnsAreRefused) {
  const std::string out = temp_path("mt-eval");
  const CommandResult r = run("eval -m " + make_model(TinyModel{}) +
                              " --methods full,snapkv:window=4 --budgets 32 --tasks niah_multiquery --lengths 800 "
                              "--samples 1 --protocol multi-turn --out " +
                              out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto records = eval::read_records(out + "/samples.jsonl");
  ASSERT_EQ(records.size(), 8u);
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i].task, "niah_multiquery/turn" + std::to_string(i % 4 + 1));
    EXPECT_EQ(records[i].protocol, "multi-turn");
    if (i % 4) {
      EXPECT_GT(records[i].n_prompt, records[i - 1].n_prompt);
    }  // the conversation grows
  }
  // Resuming skips the finished runs.
  const CommandResult again = run("eval -m " + make_model(TinyModel{}) +
                                  " --methods full,snapkv:window=4 --budgets 32 --tasks niah_multiquery --lengths 800 "
                                  "--samples 1 --protocol multi-turn --out " +
                                  out);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(eval::read_records(out + "/samples.jsonl").size(), 8u);

  expect_clean_error(run("eval -m " + make_model(TinyModel{}) +
                         " --methods full --tasks passkey --lengths 800 "
                         "--samples 1 --protocol multi-turn --out " +
                         temp_path("mt-bad")),
                     "niah_multiquery");
}

}  // namespace
}  // namespace kvslim::testing
