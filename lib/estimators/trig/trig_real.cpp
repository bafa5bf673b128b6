// Real (cos) trigonometric random features, DERF eq. 4-5 with the sign of f2 corrected.
// Variance: with a = w^T x + t, b = w^T y + t, f1 f2 = e^h (cos(a-b) + cos(a+b)), h = (|x|^2+|y|^2)/2.
// E_t over the uniform phase kills cos(a+b) and cross terms, E cos^2(w^T u) = (1 + e^{-2|u|^2})/2, so
// E (f1 f2)^2 = e^{2h} (1 + e^{-2S}/2), K^2 = e^{2h - S}, Var/K^2 = e^S + e^{-S}/2 - 1.
#include "estimators/trig/trig_real.hpp"
#include "estimators/state.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/vecmath.hpp"

namespace kestrel {

double trig_real_log_var_over_k2(double S) {
  if (S < 1) return std::log(std::expm1(S) + 0.5 * std::exp(-S));
  return S + std::log1p(-std::exp(-S) + 0.5 * std::exp(-2 * S));
}

ThreePointForm trig_real_three_point_form() {
  ThreePointTerm holo, herm;
  holo.weight = 0.5;
  holo.cx = -1.0;
  holo.cy = 0.0;
  holo.cyy = -1.0;
  herm.cxy = -1.0;
  herm.cy = 0.0;
  return {{holo, herm}};
}

TrigRealEstimator::TrigRealEstimator(arma::uword d) {
  require(d > 0, "dimension d must be > 0, got 0");
  info_ = {"trig-real", false, false};
  d_ = d;
}

arma::mat TrigRealEstimator::log_var_hook(const PairGram& g) const {
  arma::mat S = pairwise_sq_norm_sum(g, -1.0);
  simd::log_trig_real(S.memptr(), S.n_elem);  // trig_real_log_var_over_k2 as one array transform
  return S;
}

Draw TrigRealEstimator::draw_hook(arma::uword M, Rng& rng, Sampler sampler) const {
  Draw w = Estimator::draw_hook(M, rng, sampler);
  w.phase.set_size(M);
  for (double& t : w.phase) t = 2 * M_PI * rng.uniform();
  return w;
}

arma::mat TrigRealEstimator::features_hook(const Draw& w, const arma::mat& X, Side, const arma::vec& log_row_scale,
                                           bool) const {
  require(w.phase.n_elem == w.count(), "draw has {} phases for {} projections: not a trig-real draw", w.phase.n_elem,
          w.count());
  arma::mat F = X.t() * w.omega;
  F.each_row() += w.phase;
  simd::cos(F.memptr(), F.n_elem);
  arma::colvec row = 0.5 * arma::sum(arma::square(X), 0).t();
  if (!log_row_scale.is_empty()) row += log_row_scale;
  const arma::colvec scale = arma::exp(row) * M_SQRT2;
  F.each_col() %= scale;
  return F;
}

std::unique_ptr<Estimator> restore_trig_real(const nlohmann::json& j) {
  return std::make_unique<TrigRealEstimator>(state::count(j, "d"));
}

std::unique_ptr<Estimator> make_trig_real(const arma::mat& X, const arma::mat&) {
  return std::make_unique<TrigRealEstimator>(X.n_rows);
}

}  // namespace kestrel
