// Kernel scaling and input checks shared by all estimator families (see estimator.hpp).
#include "estimators/estimator.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/parallel.hpp"

namespace kestrel {

Draw Estimator::draw(arma::uword M, Rng& rng, Sampler sampler) const {
  require(M > 0, "number of features M must be > 0, got 0");
  return Draw{draw_gaussian_omegas(dim(), M, sampler, rng), {}};
}

arma::mat Estimator::log_features(const Draw& w, const arma::mat& X, Side side) const {
  require(info().positive, "estimator '{}' has no log-features: its features are not all positive", info().name);
  return arma::log(features(w, X, side));
}

arma::mat feature_map(const Estimator& e, const Draw& w, const arma::mat& X, Side side, const Kernel& k) {
  require(X.n_rows == e.dim(), "points have dimension {}, estimator '{}' was fitted for {}", X.n_rows,
          e.info().name, e.dim());
  arma::mat F = k.alpha == 0.0 ? e.features(w, X, side)
                               : e.scaled_features(w, X, side, k.alpha * arma::sum(arma::square(X), 0).t());
  if (!F.is_finite())
    throw NumericalError(fmt::format("estimator '{}': features overflow for points with |x|^2 up to {:g}",
                                     e.info().name, arma::sum(arma::square(X), 0).max()));
  return F;
}

arma::mat Estimator::scaled_features(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale) const {
  require(log_row_scale.n_elem == X.n_cols, "{} row scales for {} points", log_row_scale.n_elem, X.n_cols);
  if (info().positive) {
    arma::mat F = log_features(w, X, side);
    F.each_col() += log_row_scale;
    return exp_parallel(std::move(F));
  }
  arma::mat F = features(w, X, side);
  F.each_col() %= arma::exp(log_row_scale);
  return F;
}

arma::mat approximate_kernel(const Estimator& e, const Draw& w, const arma::mat& X, const arma::mat& Y,
                             const Kernel& k) {
  return feature_map(e, w, X, Side::Query, k) * feature_map(e, w, Y, Side::Key, k).t();
}

arma::mat approximate_kernel_times(const Estimator& e, const Draw& w, const arma::mat& X, const arma::mat& Y,
                                   const arma::mat& C, const Kernel& k) {
  require(C.n_rows == Y.n_cols, "C must have one row per point of Y ({}), got {}", Y.n_cols, C.n_rows);
  return feature_map(e, w, X, Side::Query, k) * (feature_map(e, w, Y, Side::Key, k).t() * C);
}

arma::mat Estimator::log_var_over_k2_m(const arma::mat& X, const arma::mat& Y, arma::uword M) const {
  require(M > 0, "number of features M must be > 0, got 0");
  return log_var_over_k2(X, Y) - std::log(static_cast<double>(M));
}

arma::mat log_variance(const Estimator& e, const Kernel& k, const arma::mat& X, const arma::mat& Y, arma::uword M) {
  validate_pair(X, Y, e.dim());
  return e.log_var_over_k2_m(X, Y, M) + 2.0 * log_kernel(k, X, Y);
}

void validate_pair(const arma::mat& X, const arma::mat& Y, arma::uword d) {
  validate_sets(X, Y);
  require(X.n_rows == d, "points have dimension {}, estimator expects {}", X.n_rows, d);
}

}  // namespace kestrel
