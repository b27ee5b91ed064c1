#include "eval/claims_stats.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "util/error.h"

namespace kvslim::eval {

double student_t_975(int df) {
  if (df < 1) fail("student_t_975: degrees of freedom {} must be >= 1", df);
  static constexpr double kFirst30[30] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                          2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                          2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (df <= 30) return kFirst30[df - 1];
  // Beyond 30 the quantile is close to linear in 1/df; 1/inf = 0 carries the normal quantile.
  struct Entry {
    double df, t;
  };
  static constexpr Entry kTail[] = {{30, 2.042}, {40, 2.021}, {60, 2.000}, {120, 1.980}};
  for (size_t i = 0; i + 1 < std::size(kTail); ++i)
    if (df <= kTail[i + 1].df) {
      const double x0 = 1 / kTail[i].df, x1 = 1 / kTail[i + 1].df, x = 1.0 / df;
      return kTail[i].t + (kTail[i + 1].t - kTail[i].t) * (x - x0) / (x1 - x0);
    }
  const double x0 = 1 / 120.0, x = 1.0 / df;
  return 1.960 + (1.980 - 1.960) * x / x0;
}

PairedInterval paired_interval(std::span<const double> d) {
  PairedInterval ci;
  ci.n = int(d.size());
  if (ci.n == 0) {
    ci.lo = -std::numeric_limits<double>::infinity();
    ci.hi = std::numeric_limits<double>::infinity();
    return ci;
  }
  double sum = 0;
  for (double x : d) sum += x;
  ci.mean = sum / ci.n;
  if (ci.n < 2) {
    ci.lo = -std::numeric_limits<double>::infinity();
    ci.hi = std::numeric_limits<double>::infinity();
    return ci;
  }
  double ss = 0;
  for (double x : d) ss += (x - ci.mean) * (x - ci.mean);
  const double half = student_t_975(ci.n - 1) * std::sqrt(ss / (ci.n - 1)) / std::sqrt(double(ci.n));
  ci.lo = ci.mean - half;
  ci.hi = ci.mean + half;
  return ci;
}

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::Agrees: return "agrees";
    case Verdict::Disagrees: return "disagrees";
    case Verdict::Inconclusive: return "inconclusive";
  }
  return "?";
}

Verdict verdict_above(const PairedInterval& ci) {
  if (ci.n >= 2 && ci.lo > 0) return Verdict::Agrees;
  if (ci.n >= 2 && ci.hi < 0) return Verdict::Disagrees;
  return Verdict::Inconclusive;
}

Verdict verdict_close(const PairedInterval& ci, double margin) {
  if (ci.n < 2) return Verdict::Inconclusive;
  if (ci.lo >= -margin && ci.hi <= margin) return Verdict::Agrees;
  if (ci.lo > margin || ci.hi < -margin) return Verdict::Disagrees;
  return Verdict::Inconclusive;
}

std::string format_interval(const PairedInterval& ci) {
  // A tie's mean can come out as -1e-17 (1 - 2/3 - 1/3): print it as +0.000, not -0.000.
  auto shown = [](double x) { return std::abs(x) < 5e-4 ? 0.0 : x; };
  if (ci.n < 2) return fmt::format("{:+.3f} (n<2)", shown(ci.mean));
  return fmt::format("{:+.3f} [{:+.3f}, {:+.3f}]", shown(ci.mean), shown(ci.lo), shown(ci.hi));
}

}  // namespace kvslim::eval
