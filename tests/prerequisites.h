// What a test needs that the repository does not hold: the data folder beside the clone
// (../shared: tokenizer vectors, the chat-template corpus) and programs such as chromium.
// Where one is missing the test is skipped, saying what is missing, except with CI=true: CI
// installs every prerequisite (scripts/install-deps.sh), so there a missing one fails the test
// rather than letting it pass without having run. Header-only: kvslim_gguf_tests uses it too.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

namespace kvslim::testing {

// True when the environment variable CI is "true" (as CI services set it).
inline bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string_view(ci) == "true";
}

// The test data folder: $KVSLIM_SHARED_DIR when set, else ../shared beside the source tree
// (KVSLIM_SHARED_DIR_DEFAULT, set by CMakeLists.txt).
inline std::filesystem::path shared_dir() {
  if (const char* dir = std::getenv("KVSLIM_SHARED_DIR"); dir != nullptr && *dir != '\0') return dir;
  return KVSLIM_SHARED_DIR_DEFAULT;
}

// True when `name` is a program on PATH.
inline bool program_found(const std::string& name) {
  return std::system(("command -v '" + name + "' >/dev/null 2>&1").c_str()) == 0;
}

}  // namespace kvslim::testing

// In a test body: when `present` is false, ends the test as skipped with `what` as the reason
// (anything that streams into a gtest message), or with CI=true as failed. It returns, so it
// belongs in the TEST body itself.
#define KVSLIM_REQUIRE(present, what)                                            \
  if (present) {                                                                 \
  } else if (::kvslim::testing::in_ci())                                         \
    GTEST_FAIL() << what << " (CI=true: a missing prerequisite fails the test)"; \
  else                                                                           \
    GTEST_SKIP() << what
