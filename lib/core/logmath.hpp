// Log-domain arithmetic: variances of e^300 and kernels of e^-300 are carried as logarithms.
// log1mexp follows Maechler (2012), "Accurately computing log(1 - exp(-|a|))".
#pragma once
#include <cmath>
#include <complex>
#include <limits>

namespace kestrel {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
// exp(x) is exactly +0 in double for x below this (the smallest subnormal is e^-744.44; exp rounds to 0 below
// -745.13): callers may write 0 there and skip libm's slow underflow path (same bits).
inline constexpr double kExpUnderflow = -746.0;

// log(1 - e^x) for x <= 0, accurate near 0 and for very negative x.
inline double log1mexp(double x) {
  if (x > 0) return std::numeric_limits<double>::quiet_NaN();
  return x > -M_LN2 ? std::log(-std::expm1(x)) : std::log1p(-std::exp(x));
}

// log(e^a + e^b).
inline double log_add_exp(double a, double b) {
  if (a < b) std::swap(a, b);
  if (a == -kInf) return -kInf;
  return a + std::log1p(std::exp(b - a));
}

// log(e^a - e^b) for a >= b, without cancellation; -inf when a == b.
inline double log_sub_exp(double a, double b) {
  if (b == -kInf) return a;
  return a + log1mexp(b - a);
}

// log(e^x - 1) for x > 0, accurate for tiny x and huge x.
inline double log_expm1(double x) { return x > 30 ? x + std::log1p(-std::exp(-x)) : std::log(std::expm1(x)); }

// log(cosh b - 1) = log(2 sinh^2(b/2)), accurate for tiny and huge |b|; -inf at b = 0.
inline double log_cosh_minus_one(double b) {
  b = std::abs(b);
  if (b == 0) return -kInf;
  const double h = 0.5 * b;
  const double log_sinh = h < 20 ? std::log(std::sinh(h)) : h - M_LN2 + std::log1p(-std::exp(-2 * h));
  return M_LN2 + 2 * log_sinh;
}

// A real number stored as sign * exp(log_abs); sums of such numbers without overflow.
struct SignedLog {
  double log_abs = -kInf;
  int sign = 0;  // -1, 0, +1

  static SignedLog from_log(double log_abs, int sign = 1) { return {log_abs, log_abs == -kInf ? 0 : sign}; }
  static SignedLog from_value(double v) {
    return v == 0 ? SignedLog{} : SignedLog{std::log(std::abs(v)), v > 0 ? 1 : -1};
  }
  double value() const { return sign * std::exp(log_abs); }
};

inline SignedLog operator+(SignedLog a, SignedLog b) {
  if (a.sign == 0) return b;
  if (b.sign == 0) return a;
  if (a.log_abs < b.log_abs) std::swap(a, b);
  if (a.sign == b.sign) return {a.log_abs + std::log1p(std::exp(b.log_abs - a.log_abs)), a.sign};
  if (a.log_abs == b.log_abs) return {};
  return {log_sub_exp(a.log_abs, b.log_abs), a.sign};
}

// Re(e^z) as a signed log: e^{Re z} cos(Im z).
inline SignedLog real_exp(std::complex<double> z) {
  const double c = std::cos(z.imag());
  return c == 0 ? SignedLog{} : SignedLog{z.real() + std::log(std::abs(c)), c > 0 ? 1 : -1};
}

}  // namespace kestrel
