// Streaming exact-variance statistics over all pairs (see pairwise.hpp).
#include "analysis/pairwise.hpp"

#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "core/parallel.hpp"

namespace kestrel {

PairwiseSummary summarize_exact_variance(const Estimator& e, const Kernel& k, const arma::mat& X, const arma::mat& Y,
                                         arma::uword block, arma::uword M) {
  validate_pair(X, Y, e.dim());
  require(block > 0, "block size must be > 0, got 0");
  return map_fold_pair_blocks<PairwiseSummary>(
      X, Y, block,
      [&](const arma::mat& Xb, const arma::mat& Yb, arma::uword i0, arma::uword j0) {
        const arma::mat lk = log_kernel(k, Xb, Yb);
        const arma::mat lv = e.log_var_over_k2_m(Xb, Yb, M) + 2.0 * lk;
        PairwiseSummary s;
        for (arma::uword j = 0; j < lv.n_cols; ++j) {
          for (arma::uword i = 0; i < lv.n_rows; ++i) {
            const double v = lv(i, j);
            if (std::isnan(v) || v == std::numeric_limits<double>::infinity())
              throw NumericalError(fmt::format("estimator '{}': log-variance is {} at pair (x_{}, y_{})", e.info().name,
                                               v, i0 + i, j0 + j));
            s.log_kernel.add(lk(i, j));
            if (v == -std::numeric_limits<double>::infinity()) {
              ++s.n_exact;
              continue;
            }
            s.log_var.add(v);
            s.log_rel_var.add(v - lk(i, j));
          }
        }
        return s;
      },
      [](PairwiseSummary& acc, const PairwiseSummary& p) { acc.merge(p); }, PairwiseSummary{});
}

}  // namespace kestrel
