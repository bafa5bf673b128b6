// Shifted log-variance objective (DERF eq. 8), exact over all pairs; see objective.hpp.
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

}  // namespace kestrel
