// Scaled softmax kernel in log domain (see kernel.hpp).
#include "kernels/kernel.hpp"

#include <algorithm>
#include <cmath>

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

KESTREL_VECTOR_CLONES
arma::mat pairwise_sq_norm_sum(const arma::mat& X, const arma::mat& Y, double s) {
  // O(Lx Ly d) at the DGEMM rate instead of a direct loop (bench/, issue #8); cancelling entries as in the plain loop.
  const arma::vec x2 = arma::sum(arma::square(X), 0).t();
  const arma::rowvec y2 = (s * s) * arma::sum(arma::square(Y), 0);
  arma::mat out = X.t() * Y;
  for (arma::uword j = 0; j < out.n_cols; ++j) {
    double* o = out.colptr(j);
    for (arma::uword i = 0; i < out.n_rows; ++i) o[i] = (x2[i] + y2[j]) + 2 * s * o[i];
  }
  recompute_cancelling(
      out, [&](arma::uword i, arma::uword j) { return x2[i] + y2[j]; },
      [&](arma::uword i, arma::uword j) {
        const double *x = X.colptr(i), *y = Y.colptr(j);
        double acc = 0;
        for (arma::uword l = 0; l < X.n_rows; ++l) acc += (x[l] + s * y[l]) * (x[l] + s * y[l]);
        return acc;
      });
  return out;
}

arma::mat log_kernel(const Kernel& k, const arma::mat& X, const arma::mat& Y) {
  if (k.alpha == -0.5) return -0.5 * pairwise_sq_norm_sum(X, Y, -1.0);
  const arma::rowvec x2 = arma::sum(arma::square(X), 0);
  const arma::rowvec y2 = arma::sum(arma::square(Y), 0);
  arma::mat out = X.t() * Y;
  out.each_col() += k.alpha * x2.t();
  out.each_row() += k.alpha * y2;
  return out;
}

arma::mat kernel_times(const Kernel& k, const arma::mat& X, const arma::mat& Y, const arma::mat& C) {
  require(C.n_rows == Y.n_cols, "C must have one row per point of Y ({}), got {}", Y.n_cols, C.n_rows);
  // Streams fixed blocks of 256 queries in parallel (a 256 x Ly slice of the kernel at a time, never Lx x Ly).
  constexpr arma::uword kRows = 256;
  arma::mat out(X.n_cols, C.n_cols, arma::fill::none);
  for_each_block((X.n_cols + kRows - 1) / kRows, [&](std::size_t b) {
    const arma::span rows(b * kRows, std::min<arma::uword>(X.n_cols, (b + 1) * kRows) - 1);
    arma::mat lk = log_kernel(k, X.cols(rows), Y);
    const arma::colvec shift = arma::max(lk, 1);
    lk.each_col() -= shift;
    simd::exp(lk);
    out.rows(rows) = lk * C;
    out.rows(rows).each_col() %= arma::exp(shift);
  });
  return out;
}

void validate_points(const arma::mat& X, const char* name) {
  require(X.n_rows > 0, "{}: dimension d must be > 0, got 0", name);
  require(X.n_cols > 0, "{}: number of points L must be > 0, got 0", name);
  require(X.is_finite(), "{}: points must be finite (found NaN or Inf)", name);
}

void validate_sets(const arma::mat& X, const arma::mat& Y) {
  validate_points(X, "X");
  validate_points(Y, "Y");
  require(X.n_rows == Y.n_rows, "X and Y must have the same dimension, got {} and {}", X.n_rows, Y.n_rows);
}

}  // namespace kestrel
