// Running mean/variance (Welford) with Chan's merge, combined in a fixed order for reproducibility.
#pragma once
#include <cmath>
#include <cstdint>

namespace kestrel {

struct RunningStats {
  double n = 0, mean = 0, m2 = 0;

  void add(double x) {
    n += 1;
    const double delta = x - mean;
    mean += delta / n;
    m2 += delta * (x - mean);
  }
  void merge(const RunningStats& o) {
    if (o.n == 0) return;
    if (n == 0) {
      *this = o;
      return;
    }
    const double total = n + o.n;
    const double delta = o.mean - mean;
    mean += delta * o.n / total;
    m2 += o.m2 + delta * delta * n * o.n / total;
    n = total;
  }
  // Population standard deviation over all values seen (the papers report spread over pairs).
  double stddev() const { return n > 0 ? std::sqrt(m2 / n) : 0.0; }
};

}  // namespace kestrel
