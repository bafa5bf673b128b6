// Shifted log-variance objective (DERF eq. 8): exact all-pairs evaluation and closed forms; see objective.hpp.
#include "analysis/objective.hpp"

#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "core/parallel.hpp"

namespace kestrel {

double shifted_log_variance_objective(const Estimator& e, const arma::mat& X, const arma::mat& Y, arma::uword block) {
  validate_pair(X, Y, e.dim());
  require(block > 0, "block size must be > 0, got 0");
  const double total = map_fold_pair_blocks<double>(
      X, Y, block,
      [&](const arma::mat& Xb, const arma::mat& Yb, arma::uword i0, arma::uword j0) {
        const arma::mat lr = e.log_var_over_k2(Xb, Yb);
        const arma::mat xy = Xb.t() * Yb;
        double sum = 0;
        for (arma::uword j = 0; j < lr.n_cols; ++j) {
          for (arma::uword i = 0; i < lr.n_rows; ++i) {
            const double v = lr(i, j);
            if (std::isnan(v) || v == std::numeric_limits<double>::infinity())
              throw NumericalError(fmt::format("estimator '{}': log-variance is {} at pair (x_{}, y_{})", e.info().name,
                                               v, i0 + i, j0 + j));
            // log(Var/K^2 + 1) = softplus(v), exact (0) pairs included.
            const double sp = v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v));
            sum += sp + 2.0 * xy(i, j);
          }
        }
        return sum;
      },
      [](double& acc, double p) { acc += p; }, 0.0);
  return total / (static_cast<double>(X.n_cols) * static_cast<double>(Y.n_cols));
}

double gerf_shifted_objective(const GerfParams& p, const HomogeneityStats& st) {
  validate(p);
  require(p.s == 1 && p.A.imag() == 0.0, "the DERF-paper GERF objective needs real A and s = +1, got A = {}+{}i, s = {}",
          p.A.real(), p.A.imag(), p.s);
  const double a = p.A.real(), dd = static_cast<double>(st.d);
  return dd * (std::log1p(-4 * a) - 0.5 * std::log1p(-8 * a)) + (2 - 8 * a) / (1 - 8 * a) * st.mean_sum_sq(1) -
         st.mean_x2 - st.mean_y2;
}

double derf_objective(const DerfParams& p, const DerfStats& st) {
  validate(p);
  require(st.d == p.dim(), "statistics have dimension {}, DERF has {}", st.d, p.dim());
  const DerfSecondMoment f = derf_second_moment(p);
  return f.c0 + arma::trace(f.TB1.t() * f.TB1 * st.M1) + arma::trace(f.TB2.t() * f.TB2 * st.M2) +
         2.0 * arma::dot(f.TB1 * st.mu4, f.TB2 * st.mu5) + 2.0 * arma::dot(st.mu4, st.mu5);
}

double aderf_objective(const AderfFit& f) {
  const double d = static_cast<double>(f.sigma.n_elem), A = f.A;
  return d * (std::log1p(-4 * A) - 0.5 * std::log1p(-8 * A) + 2.0 / (1 - 8 * A) * (arma::mean(f.sigma) + f.mu3) +
              2 * f.mu3);
}

double sderf_objective(const SderfFit& f, const DerfStats& st) {
  const arma::vec& a = f.a;
  return arma::accu(arma::log1p(-4 * a) - 0.5 * arma::log1p(-8 * a) + (1 + 1 / (1 - 8 * a)) % f.lambda3) -
         arma::trace(st.M1) - arma::trace(st.M2);
}

double saderf_objective(const SaderfFit& f) { return gerf_shifted_objective(f.gerf, f.transformed); }

}  // namespace kestrel
