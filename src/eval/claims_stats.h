// The statistics `kvslim claims` decides by (docs/claims.md): a claim compares method A with
// method B on the same held-out samples, so each sample gives one paired difference
// d_i = a_i - b_i (score, recall or cost) and the verdict rests on the 95% confidence interval of
// the mean difference, mean(d) ± t(0.975, n-1) * sd(d) / sqrt(n) (Student's t, sample standard
// deviation with n-1). Pairing removes the variance the samples share (an easy prompt is easy for
// both methods).
#pragma once

#include <span>
#include <string>

namespace kvslim::eval {

struct PairedInterval {
  int n = 0;              // pairs
  double mean = 0;        // mean difference
  double lo = 0, hi = 0;  // 95% interval (infinite when n < 2)
};

// The two-sided 97.5% quantile of Student's t with `df` >= 1 degrees of freedom: the printed
// table for 1..30, 40, 60, 120 and the normal 1.960 beyond, linear in 1/df between entries.
double student_t_975(int df);

PairedInterval paired_interval(std::span<const double> differences);

enum class Verdict { Agrees, Disagrees, Inconclusive };
const char* verdict_name(Verdict v);

// "A above B": agrees when lo > 0, disagrees when hi < 0; an interval containing 0 (ties
// included: every d_i = 0 gives [0, 0]) is inconclusive.
Verdict verdict_above(const PairedInterval& ci);
// "A close to B" within `margin`: agrees when the whole interval lies in [-margin, margin],
// disagrees when it lies wholly outside it (lo > margin or hi < -margin), else inconclusive.
Verdict verdict_close(const PairedInterval& ci, double margin);

// "+0.125 [+0.031, +0.219]" (3 decimals; "n<2" without an interval).
std::string format_interval(const PairedInterval& ci);

}  // namespace kvslim::eval
