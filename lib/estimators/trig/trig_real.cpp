// Real (cos) trigonometric random features, DERF eq. 4-5 with the sign of f2 corrected.
// Variance: with a = w^T x + t, b = w^T y + t, f1 f2 = e^h (cos(a-b) + cos(a+b)), h = (|x|^2+|y|^2)/2.
// E_t over the uniform phase kills cos(a+b) and cross terms, E cos^2(w^T u) = (1 + e^{-2|u|^2})/2, so
// E (f1 f2)^2 = e^{2h} (1 + e^{-2S}/2), K^2 = e^{2h - S}, Var/K^2 = e^S + e^{-S}/2 - 1.
#include "estimators/trig/trig_real.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/vecmath.hpp"

namespace kestrel {

double trig_real_log_var_over_k2(double S) {
  if (S < 1) return std::log(std::expm1(S) + 0.5 * std::exp(-S));
  return S + std::log1p(-std::exp(-S) + 0.5 * std::exp(-2 * S));
}

TrigRealEstimator::TrigRealEstimator(arma::uword d) : d_(d) { require(d > 0, "dimension d must be > 0, got 0"); }

arma::mat TrigRealEstimator::log_var_over_k2(const arma::mat& X, const arma::mat& Y) const {
  validate_pair(X, Y, d_);
  arma::mat S = pairwise_sq_norm_sum(X, Y, -1.0);
  simd::log_trig_real(S.memptr(), S.n_elem);  // trig_real_log_var_over_k2 as one array transform
  return S;
}

Draw TrigRealEstimator::draw(arma::uword M, Rng& rng, Sampler sampler) const {
  Draw w = Estimator::draw(M, rng, sampler);
  w.phase.set_size(M);
  for (double& t : w.phase) t = 2 * M_PI * rng.uniform();
  return w;
}

arma::mat TrigRealEstimator::scaled_features(const Draw& w, const arma::mat& X, Side,
                                             const arma::vec& log_row_scale) const {
  require(log_row_scale.n_elem == X.n_cols, "{} row scales for {} points", log_row_scale.n_elem, X.n_cols);
  require(w.omega.n_rows == d_ && w.phase.n_elem == w.count(), "draw does not match a trig-real estimator of dimension {}",
          d_);
  arma::mat F = X.t() * w.omega;
  F.each_row() += w.phase;
  simd::cos(F.memptr(), F.n_elem);
  const arma::colvec scale = arma::exp(0.5 * arma::sum(arma::square(X), 0).t() + log_row_scale) * std::sqrt(2.0 / w.count());
  F.each_col() %= scale;
  return F;
}

std::unique_ptr<Estimator> make_trig_real(const arma::mat& X, const arma::mat&) {
  return std::make_unique<TrigRealEstimator>(X.n_rows);
}

}  // namespace kestrel
