// Scaled softmax kernel in log domain (see kernel.hpp).
#include "kernels/kernel.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

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

__attribute__((target_clones("avx2", "default")))
arma::mat pairwise_sq_norm_sum(const arma::mat& X, const arma::mat& Y, double s) {
  // Every entry is summed over l = 0..d-1 in order from 0, exactly as the plain triple loop would, but kBlock
  // entries (consecutive i) at a time from X^T, so the compiler vectorises over i and a block of X^T stays in
  // L1 across all j. Bit-identical to the plain loop (the AVX2 clone has no FMA, so no contraction), and several
  // times faster (bench/, issue #8).
  constexpr arma::uword kBlock = 16;
  const arma::uword d = X.n_rows, lx = X.n_cols;
  const arma::mat Xt = X.t();
  arma::mat out(lx, Y.n_cols);
  for (arma::uword i0 = 0; i0 < lx; i0 += kBlock) {
    const arma::uword nb = std::min(kBlock, lx - i0);
    for (arma::uword j = 0; j < Y.n_cols; ++j) {
      const double* y = Y.colptr(j);
      double acc[kBlock] = {};
      for (arma::uword l = 0; l < d; ++l) {
        const double* xl = Xt.colptr(l) + i0;
        const double sy = s * y[l];
        if (nb == kBlock) {
          for (arma::uword k = 0; k < kBlock; ++k) {
            const double v = xl[k] + sy;
            acc[k] += v * v;
          }
        } else {
          for (arma::uword k = 0; k < nb; ++k) {
            const double v = xl[k] + sy;
            acc[k] += v * v;
          }
        }
      }
      std::copy(acc, acc + nb, out.colptr(j) + i0);
    }
  }
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
  arma::mat lk = log_kernel(k, X, Y);
  const arma::colvec shift = arma::max(lk, 1);
  lk.each_col() -= shift;
  arma::mat out = arma::exp(lk) * C;
  out.each_col() %= arma::exp(shift);
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
