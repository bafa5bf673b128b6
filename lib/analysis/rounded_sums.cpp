// Rounding to fp32 / bf16 / fp16 from the definition and running key sums held in them (rounded_sums.hpp).
#include "analysis/rounded_sums.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "core/parse.hpp"

namespace kestrel {

double FloatFormat::max() const { return std::ldexp(2.0 - std::ldexp(1.0, 1 - digits), emax); }
double FloatFormat::min_normal() const { return std::ldexp(1.0, emin); }
double FloatFormat::min_subnormal() const { return std::ldexp(1.0, emin - digits + 1); }

const std::vector<FloatFormat>& float_formats() {
  static const std::vector<FloatFormat> f{{"fp32", 24, -126, 127}, {"bf16", 8, -126, 127}, {"fp16", 11, -14, 15}};
  return f;
}

std::vector<std::string> float_format_names() {
  std::vector<std::string> n;
  for (const auto& f : float_formats()) n.push_back(f.name);
  return n;
}

const FloatFormat& find_float_format(const std::string& name) {
  for (const auto& f : float_formats())
    if (f.name == name) return f;
  throw InvalidArgument(fmt::format("unknown number format '{}': expected fp32, bf16 or fp16{}", name,
                                    did_you_mean(name, float_format_names())));
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A format's constants for the hot loop.
struct Rounder {
  int drop;        // bits of double's 52-bit fraction below the format's spacing (normal numbers)
  int emin;        // smallest normal exponent
  double quantum;  // spacing of the subnormals, 2^(emin - p + 1)
  double top;      // largest finite value
  explicit Rounder(const FloatFormat& f)
      : drop(52 - (f.digits - 1)), emin(f.emin), quantum(f.min_subnormal()), top(f.max()) {}

  double operator()(double x) const {
    if (x == 0 || !std::isfinite(x)) return x;
    std::uint64_t b;
    std::memcpy(&b, &x, sizeof b);
    const std::uint64_t sign = b & (std::uint64_t{1} << 63);
    std::uint64_t mag = b ^ sign;
    const int e = static_cast<int>(mag >> 52) - 1023;  // 2^e <= |x| < 2^(e+1) (x a normal double)
    double r;
    if (e >= emin) {
      // Keep the leading p digits; the rest decides: above half the spacing up, below down, exactly half to the even
      // neighbour. Adding the spacing to the magnitude's bits carries into the exponent where the digits overflow.
      const std::uint64_t unit = std::uint64_t{1} << drop, half = unit >> 1, rest = mag & (unit - 1);
      mag -= rest;
      const bool up = (rest > half) | ((rest == half) & ((mag & unit) != 0));  // no branch: the rest is random
      mag += static_cast<std::uint64_t>(up) << drop;
      mag |= sign;
      std::memcpy(&r, &mag, sizeof r);
    } else {
      // Below 2^emin the spacing stays 2^(emin - p + 1): x / spacing is exact (a power of two), round it to an integer.
      const double y = std::fabs(x) / quantum;
      double n = std::floor(y);
      const double rest = y - n;
      if (rest > 0.5 || (rest == 0.5 && std::fmod(n, 2.0) == 1.0)) n += 1;
      r = std::copysign(n * quantum, x);
    }
    return std::fabs(r) > top ? std::copysign(kInf, x) : r;
  }
};

constexpr arma::uword kFeatureBlock = 8;  // features per parallel block

}  // namespace

double round_to(double x, const FloatFormat& f) { return Rounder(f)(x); }

RoundedSums::RoundedSums(const FloatFormat& f, arma::uword features, arma::uword values, arma::uword chunk)
    : f_(f), chunk_(chunk) {
  require(features >= 1, "rounded sums: expected at least 1 feature, got {}", features);
  require(chunk >= 1, "rounded sums: chunk must be >= 1 token, got {}", chunk);
  S_.zeros(values + 1, features);
  acc_.zeros(values + 1, features);
  overflow_.assign((features + kFeatureBlock - 1) / kFeatureBlock, 0);
}

void RoundedSums::add(const arma::mat& phi, const arma::mat& V) {
  const arma::uword M = S_.n_cols, dv = S_.n_rows - 1, n = phi.n_rows;
  require(phi.n_cols == M && V.n_rows == n && V.n_cols == dv,
          "rounded sums: expected {} x {} features and {} x {} values, got {} x {} and {} x {}", n, M, n, dv,
          phi.n_rows, phi.n_cols, V.n_rows, V.n_cols);
  const Rounder R(f_), R32(float_formats()[0]);
  // The values as the model stores them, one column per token, the normaliser's 1 last.
  arma::mat Vt(dv + 1, n);
  for (arma::uword j = 0; j < n; ++j) {
    for (arma::uword c = 0; c < dv; ++c) Vt(c, j) = R(V(j, c));
    Vt(dv, j) = 1;
  }
  std::vector<double> flushed(overflow_.size(), 0.0);
  const arma::uword t0 = tokens_, chunk = chunk_;
  for_each_block(overflow_.size(), [&](std::size_t b) {
    if (overflow_[b]) return;  // frozen at its overflow
    arma::uword first = 0;
    for (arma::uword m = b * kFeatureBlock; m < std::min(M, (b + 1) * kFeatureBlock); ++m) {
      double* s = S_.colptr(m);
      double* a = acc_.colptr(m);
      const double* ph = phi.colptr(m);
      for (arma::uword j = 0; j < n; ++j) {
        const double p = R(ph[j]);
        if (p == 0 && ph[j] > 0) flushed[b] += 1;
        const double* v = Vt.colptr(j);
        const arma::uword t = t0 + j + 1;
        bool inf = false;
        if (chunk == 1) {
          for (arma::uword c = 0; c <= dv; ++c) {
            s[c] = R(s[c] + R(p * v[c]));
            inf |= std::isinf(s[c]);
          }
        } else {
          for (arma::uword c = 0; c <= dv; ++c) {
            a[c] = R32(a[c] + R32(p * v[c]));
            inf |= std::isinf(a[c]);
          }
          if (t % chunk == 0)
            for (arma::uword c = 0; c <= dv; ++c) {
              s[c] = R(s[c] + R(a[c]));
              a[c] = 0;
              inf |= std::isinf(s[c]);
            }
        }
        if (inf) {
          first = first ? std::min(first, t) : t;
          break;
        }
      }
    }
    overflow_[b] = first;
  });
  for (double v : flushed) flushed_ += v;
  stored_ += static_cast<double>(n) * static_cast<double>(M);
  tokens_ += n;
}

arma::mat RoundedSums::state() const {
  arma::mat S = S_;
  if (chunk_ > 1 && tokens_ % chunk_ != 0) {
    const Rounder R(f_);
    for (arma::uword k = 0; k < S.n_elem; ++k) S[k] = R(S[k] + R(acc_[k]));
  }
  return S.t();
}

arma::uword RoundedSums::overflow() const {
  arma::uword first = 0;
  for (arma::uword t : overflow_)
    if (t) first = first ? std::min(first, t) : t;
  return first;
}

}  // namespace kestrel
