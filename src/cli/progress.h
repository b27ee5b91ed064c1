// A sweep's progress on stderr: a bar with the elapsed time and the ETA, redrawn in place when
// stderr is a terminal; otherwise one line per finished run, so that logs stay readable.
#pragma once

#include <chrono>
#include <string>

#include "eval/sweep.h"

namespace kvslim::cli {

// "1h02m", "3m05s", "12s".
std::string format_duration(double seconds);

class Progress {
 public:
  Progress();
  void operator()(const eval::SweepProgress& progress);
  // Ends the bar's line (nothing to do for line-per-run output).
  void finish();

 private:
  bool terminal_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace kvslim::cli
