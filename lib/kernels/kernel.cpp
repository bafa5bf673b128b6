// Scaled softmax kernel in log domain (see kernel.hpp).
#include "kernels/kernel.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "core/vecmath.hpp"

namespace kestrel {

Kernel Kernel::parse(const std::string& name) {
  if (name == "softmax") return softmax();
  if (name == "gaussian") return gaussian();
  if (name.rfind("scaled:", 0) == 0) {
    std::size_t pos = 0;
    double a = 0;
    try {
      a = std::stod(name.substr(7), &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    require(pos > 0 && pos == name.size() - 7 && std::isfinite(a), "kernel alpha must be a finite number, got '{}'",
            name.substr(7));
    return {a};
  }
  throw InvalidArgument(fmt::format("unknown kernel '{}' (expected softmax, gaussian or scaled:<alpha>)", name));
}

std::string Kernel::name() const {
  if (alpha == 0.0) return "softmax";
  if (alpha == -0.5) return "gaussian";
  return fmt::format("scaled:{}", alpha);
}

const arma::mat& PairGram::xy() const {
  if (!xy_) xy_ = X.t() * Y;
  return *xy_;
}

const arma::rowvec& PairGram::x2() const {
  if (!x2_) x2_ = arma::sum(arma::square(X), 0);
  return *x2_;
}

const arma::rowvec& PairGram::y2() const {
  if (!y2_) y2_ = arma::sum(arma::square(Y), 0);
  return *y2_;
}

namespace {

// factor |x_i + s y_j|^2 from the Gram form, O(Lx Ly d) at the DGEMM rate instead of a direct loop (bench/, issue #8).
// Entries that cancel are recomputed directly as in recompute_cancelling, whose check runs in the same pass. factor is
// 1 or -1/2 (log of the Gaussian kernel): a power of two, so the scaled entry is exactly the scaled sum.
KESTREL_VECTOR_CLONES
arma::mat sq_norm_sum_from(const PairGram& g, double s, double factor = 1.0) {
  const arma::rowvec& x2 = g.x2();
  const arma::rowvec y2 = (s * s) * g.y2();
  const arma::mat& xy = g.xy();
  arma::mat out(xy.n_rows, xy.n_cols, arma::fill::none);
  int any = 0;
  for (arma::uword j = 0; j < out.n_cols; ++j) {
    const double* p = xy.colptr(j);
    double* o = out.colptr(j);
    for (arma::uword i = 0; i < out.n_rows; ++i) {
      const double m = x2[i] + y2[j], v = m + 2 * s * p[i];
      any |= v < m * (1.0 / 64);
      o[i] = factor * v;
    }
  }
  if (!any) return out;
  const arma::mat &X = g.X, &Y = g.Y;
  for (arma::uword j = 0; j < out.n_cols; ++j)
    for (arma::uword i = 0; i < out.n_rows; ++i) {
      if (out(i, j) / factor >= (x2[i] + y2[j]) * (1.0 / 64)) continue;
      const double *x = X.colptr(i), *y = Y.colptr(j);
      double acc = 0;
      for (arma::uword l = 0; l < X.n_rows; ++l) acc += (x[l] + s * y[l]) * (x[l] + s * y[l]);
      out(i, j) = factor * acc;
    }
  return out;
}

}  // namespace

arma::mat pairwise_sq_norm_sum(const PairGram& g, double s) { return sq_norm_sum_from(g, s); }

arma::mat pairwise_sq_norm_sum(const arma::mat& X, const arma::mat& Y, double s) {
  return sq_norm_sum_from(PairGram(X, Y), s);
}

KESTREL_VECTOR_CLONES
arma::mat log_kernel(const Kernel& k, const PairGram& g) {
  if (k.alpha == -0.5) return sq_norm_sum_from(g, -1.0, -0.5);  // -|x - y|^2 / 2
  const arma::rowvec ax = k.alpha * g.x2(), ay = k.alpha * g.y2();
  const arma::mat& xy = g.xy();
  arma::mat out(xy.n_rows, xy.n_cols, arma::fill::none);
  for (arma::uword j = 0; j < out.n_cols; ++j) {
    const double* p = xy.colptr(j);
    double* o = out.colptr(j);
    for (arma::uword i = 0; i < out.n_rows; ++i) o[i] = (p[i] + ax[i]) + ay[j];
  }
  return out;
}

arma::mat log_kernel(const Kernel& k, const arma::mat& X, const arma::mat& Y) { return log_kernel(k, PairGram(X, Y)); }

arma::mat kernel_times(const Kernel& k, const arma::mat& X, const arma::mat& Y, const arma::mat& C) {
  require(C.n_rows == Y.n_cols, "C must have one row per point of Y ({}), got {}", Y.n_cols, C.n_rows);
  // Streams fixed blocks of 256 queries in parallel (a 256 x Ly slice of the kernel at a time, never Lx x Ly).
  constexpr arma::uword kRows = 256;
  arma::mat out(X.n_cols, C.n_cols, arma::fill::none);
  for_each_block((X.n_cols + kRows - 1) / kRows, [&](std::size_t b) {
    const arma::span rows(b * kRows, std::min<arma::uword>(X.n_cols, (b + 1) * kRows) - 1);
    arma::mat lk = log_kernel(k, X.cols(rows), Y);
    const arma::colvec shift = simd::row_max(lk);
    lk.each_col() -= shift;
    simd::exp(lk);
    out.rows(rows) = lk * C;
    out.rows(rows).each_col() %= arma::exp(shift);
  });
  return out;
}

namespace {

// Whether every entry is finite, from the exponent bits (all ones for inf and NaN): integer operations, which the
// compiler vectorises (Armadillo's is_finite tests entry by entry; it was 5% of the pairwise variance, once per tile).
KESTREL_VECTOR_CLONES
bool all_finite(const double* p, std::size_t n) {
  constexpr std::uint64_t kExp = 0x7ff0000000000000ULL;
  std::uint64_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t b;
    std::memcpy(&b, p + i, sizeof b);
    bad |= (b & kExp) == kExp;
  }
  return bad == 0;
}

}  // namespace

void validate_points(const arma::mat& X, const char* name) {
  require(X.n_rows > 0, "{}: dimension d must be > 0, got 0", name);
  require(X.n_cols > 0, "{}: number of points L must be > 0, got 0", name);
  require(all_finite(X.memptr(), X.n_elem), "{}: points must be finite (found NaN or Inf)", name);
}

void validate_sets(const arma::mat& X, const arma::mat& Y) {
  validate_points(X, "X");
  validate_points(Y, "Y");
  require(X.n_rows == Y.n_rows, "X and Y must have the same dimension, got {} and {}", X.n_rows, Y.n_rows);
}

}  // namespace kestrel
