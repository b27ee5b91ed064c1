#include "cli/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace kvslim::cli {

std::string format_duration(double seconds) {
  const long s = std::lround(std::max(seconds, 0.0));
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

Progress::Progress() : terminal_(isatty(fileno(stderr)) != 0), start_(std::chrono::steady_clock::now()) {}

void Progress::operator()(const eval::SweepProgress& p) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  // The mean time per run so far, times the runs left.
  const double eta = p.done > 0 ? elapsed / double(p.done) * double(p.total - p.done) : 0;
  const eval::SampleRecord& r = *p.record;
  const std::string what = r.budget > 0 ? fmt::format("{} @{} {} {}", r.method, r.budget, r.task, r.length)
                                        : fmt::format("{} {} {}", r.method, r.task, r.length);
  if (!terminal_) {
    fmt::print(stderr, "[{}/{}] {} seed {}: score {:.3f}, {:.0f} ms; elapsed {}, ETA {}\n", p.done, p.total, what,
               r.seed, r.score, r.prefill_ms + r.decode_ms, format_duration(elapsed), format_duration(eta));
    return;
  }
  constexpr int kWidth = 30;
  const int filled = p.total > 0 ? int(double(kWidth) * double(p.done) / double(p.total)) : kWidth;
  fmt::print(stderr, "\r[{:=<{}}{:<{}}] {}/{} elapsed {} ETA {}  {}\x1b[K", "", filled, "", kWidth - filled, p.done,
             p.total, format_duration(elapsed), format_duration(eta), what);
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::finish() {
  if (drawn_) fmt::print(stderr, "\n");
}

}  // namespace kvslim::cli
