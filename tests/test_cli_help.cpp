// `kvslim --version` and `kvslim --help`: the version line, and every subcommand listed under one
// of the named groups (a new subcommand without a group would land under "Other").
#include <gtest/gtest.h>

#include <regex>

#include "cli_helpers.h"

namespace kvslim::testing {
namespace {

TEST(CliHelp, VersionNamesReleaseAndRevision) {
  const CommandResult r = run("--version");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(^kvslim \d+\.\d+\.\d+ \(git [0-9a-f]+|unknown\))"))) << r.out;
}

TEST(CliHelp, EverySubcommandIsInAGroup) {
  const CommandResult r = run("--help");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* group : {"Run:", "Compress:", "Evaluate:", "Train:", "Tools:"})
    EXPECT_NE(r.out.find(group), std::string::npos) << group << "\n" << r.out;
  EXPECT_EQ(r.out.find("Other:"), std::string::npos) << r.out;
  for (const char* cmd : {"generate", "chat", "serve", "quantize", "perplexity", "claims", "apply-template"})
    EXPECT_NE(r.out.find(std::string("  ") + cmd), std::string::npos) << cmd << "\n" << r.out;
}

}  // namespace
}  // namespace kvslim::testing
