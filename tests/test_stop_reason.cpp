// Why an answer stopped: an enum in the engine, spelled for users by to_string alone (generate
// --json's "stop_reason", the stats lines), with the words they had when it was a string.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_helpers.h"
#include "engine/stop_reason.h"

namespace kvslim {
namespace {

TEST(StopReason, EachReasonHasItsWord) {
  EXPECT_EQ(to_string(StopReason::None), "none");
  EXPECT_EQ(to_string(StopReason::Eos), "eos");
  EXPECT_EQ(to_string(StopReason::Length), "length");
  EXPECT_EQ(to_string(StopReason::Context), "context");
  EXPECT_EQ(to_string(StopReason::Interrupted), "interrupted");
}

// -n reached: "length" in the JSON, exactly as before the enum.
TEST(StopReason, GenerateJsonSpellsIt) {
  const testing::CommandResult r =
      testing::run("generate -m " + testing::make_model(testing::TinyModel{}) + " -p 'the cat' -n 1 --temp 0 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  if (j["n_generated"] == 0) GTEST_SKIP() << "the random model chose EOS first";
  EXPECT_EQ(j["stop_reason"], "length");
}

}  // namespace
}  // namespace kvslim
