// Running the `kvslim` binary (KVSLIM_BINARY) from tests: exit code, stdout and stderr, and the
// shape every failed command must have.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <string>

#include "test_models.h"

namespace kvslim::testing {

struct CommandResult {
  int exit_code;
  std::string out;  // stdout
  std::string err;  // stderr
};

// env: variable assignments put before the binary, e.g. "KVSLIM_ISA=scalar".
inline CommandResult run(const std::string& args, const std::string& env = "") {
  const std::string err_path = temp_path("stderr.txt");
  const std::string cmd = env + " " + std::string(KVSLIM_BINARY) + " " + args + " 2>" + err_path;
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe);
  std::ifstream in(err_path);
  std::string err((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out, err};
}

// A failed command prints exactly one line, starting with "error:" and containing `needle`.
inline void expect_clean_error(const CommandResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

}  // namespace kvslim::testing
