// PosRF with antithetic pairs: draws, features and the exact M-feature variance (derivation in antithetic.hpp).
#include "estimators/antithetic/antithetic.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/logmath.hpp"
#include "core/vecmath.hpp"
#include "estimators/state.hpp"

namespace kestrel {

namespace {

// log(Var/K^2) for M features from lp = log(cosh S - 1) (one pair) and l1 = log(e^S - 1) (one unpaired feature):
// log(4P e^lp + r e^l1) - 2 log M with P = floor(M/2), r = M mod 2. Both are -inf together (S = 0), and then so is
// the result; log_add_exp never forms e^lp or e^l1, so S of 1e4 is as finite as S of 1e-12.
double combine(double lp, double l1, arma::uword M) {
  const double m = static_cast<double>(M);
  const arma::uword P = M / 2;
  if (P == 0) return l1;  // M = 1
  const double paired = std::log(4.0 * static_cast<double>(P)) + lp;
  return (M % 2 == 0 ? paired : log_add_exp(paired, l1)) - 2.0 * std::log(m);
}

}  // namespace

double pos_anti_log_var_over_k2(double S, arma::uword M) {
  require(M > 0, "number of features M must be > 0, got 0");
  require(S >= 0 && std::isfinite(S), "S = |x + y|^2 must be finite and >= 0, got {}", S);
  return combine(log_cosh_minus_one(S), S > 0 ? log_expm1(S) : -kInf, M);
}

PosAntiEstimator::PosAntiEstimator(arma::uword d) {
  require(d > 0, "dimension d must be > 0, got 0");
  d_ = d;
  info_ = {.name = "pos-anti", .complex = false, .positive = true};
}

nlohmann::json PosAntiEstimator::params() const {
  return {{"family", "pos-anti"}, {"pairs", "floor(M/2) antithetic pairs (w, -w), plus one unpaired w for odd M"}};
}

arma::mat PosAntiEstimator::log_var_hook(const PairGram& g) const {
  arma::mat S = pairwise_sq_norm_sum(g, 1.0);
  return simd::log_expm1(S);  // one feature is one unpaired PosRF feature: log(e^S - 1), -inf at S = 0
}

arma::mat PosAntiEstimator::log_var_m_hook(const PairGram& g, arma::uword M) const {
  arma::mat l1 = pairwise_sq_norm_sum(g, 1.0);
  if (M == 1) return simd::log_expm1(l1);
  arma::mat lp = l1;
  simd::log_cosh_minus_one(lp.memptr(), lp.n_elem);  // the array forms of core/logmath's log_cosh_minus_one, log_expm1
  if (M % 2 == 1) simd::log_expm1(l1);
  for (arma::uword i = 0; i < lp.n_elem; ++i) lp[i] = combine(lp[i], l1[i], M);
  return lp;
}

Draw PosAntiEstimator::draw_hook(arma::uword M, Rng& rng, Sampler sampler) const {
  const arma::uword P = M / 2, n = M - P;  // n = ceil(M/2) omegas from the sampler; the first P are paired
  const arma::mat W = draw_gaussian_omegas(dim(), n, sampler, rng);
  Draw w;
  w.omega.set_size(dim(), M);
  if (P > 0) {
    w.omega.cols(0, P - 1) = W.cols(0, P - 1);
    w.omega.cols(P, 2 * P - 1) = -W.cols(0, P - 1);
  }
  if (M % 2 == 1) w.omega.col(M - 1) = W.col(n - 1);
  return w;
}

// The same omegas interleaved: a prefix of length 2P holds P pairs, one of length 2P + 1 also the next omega unpaired,
// which is how draw(2P + 1) is made (its ceil(M/2) omegas are the sampler's first ones).
Draw PosAntiEstimator::nested_draw_hook(arma::uword M, Rng& rng, Sampler sampler) const {
  const arma::mat W = draw_gaussian_omegas(dim(), M - M / 2, sampler, rng);
  Draw w;
  w.omega.set_size(dim(), M);
  for (arma::uword m = 0; m < M; ++m) w.omega.col(m) = m % 2 == 0 ? W.col(m / 2) : arma::vec(-W.col(m / 2));
  return w;
}

// features_hook's pieces: P = w (the draw holds the negatives), col = 0, row = -|x|^2 / 2.
std::optional<FeatureMap::Exponent> PosAntiEstimator::exponent_hook(const Draw* w, const arma::mat* X, Side) const {
  Exponent e;
  if (w) e.form = {w->omega, arma::rowvec(w->count(), arma::fill::zeros)};
  if (X) e.points = {*X, -0.5 * arma::sum(arma::square(*X), 0).t()};
  return e;
}

arma::mat PosAntiEstimator::features_hook(const Draw& w, const arma::mat& X, Side, const arma::vec& log_row_scale,
                                          bool log) const {
  // exp(w_m^T x - |x|^2/2) for every stored omega: the draw already holds the negatives.
  arma::mat E = X.t() * w.omega;
  arma::colvec row = -0.5 * arma::sum(arma::square(X), 0).t();
  E.each_col() += row;
  return from_exponent(std::move(E), log_row_scale, log);
}

nlohmann::json PosAntiEstimator::state() const { return {{"family", info_.name}, {"d", d_}}; }

std::unique_ptr<Estimator> restore_pos_anti(const nlohmann::json& state) {
  return std::make_unique<PosAntiEstimator>(state::count(state, "d"));
}

std::unique_ptr<Estimator> make_pos_anti(const arma::mat& X, const arma::mat&) {
  return std::make_unique<PosAntiEstimator>(X.n_rows);
}

}  // namespace kestrel
