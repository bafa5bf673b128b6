// DARK importance-weighted PRF (darkformer.txt eq. 2 with the weight split between the two sides):
// proposal validation, exact single-feature variance and feature maps; see dark.hpp.
#include "estimators/dark/dark.hpp"

#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "core/logmath.hpp"
#include "core/parallel.hpp"
#include "core/vecmath.hpp"
#include "estimators/state.hpp"

namespace kestrel {

namespace {

std::vector<double> to_vector(const arma::vec& v) { return arma::conv_to<std::vector<double>>::from(v); }

}  // namespace

SymEigen validate_dark_proposal(const arma::mat& Sigma) {
  const arma::uword d = Sigma.n_rows;
  require(d > 0 && Sigma.n_cols == d, "DARK proposal Sigma must be a nonempty square matrix, got {} x {}", Sigma.n_rows,
          Sigma.n_cols);
  require(Sigma.is_finite(), "DARK proposal Sigma must be finite (found NaN or Inf)");
  const double scale = std::max(1.0, arma::abs(Sigma).max());
  const double asym = arma::abs(Sigma - Sigma.t()).max();
  require(asym <= 1e-10 * scale, "DARK proposal Sigma must be symmetric, got max |Sigma - Sigma^T| = {:.3g}", asym);
  SymEigen e;
  e.mat = 0.5 * (Sigma + Sigma.t());
  if (!arma::eig_sym(e.values, e.vectors, e.mat)) throw NumericalError("DARK: eigendecomposition of Sigma failed");
  require(e.values.min() > 0, "DARK proposal Sigma must be positive definite, but its smallest eigenvalue is {}",
          e.values.min());
  require(e.values.min() > 0.5,
          "DARK importance-weighted PRFs have finite variance only if every eigenvalue of Sigma is > 1/2 "
          "(Sigma^-1 < 2I), but the smallest eigenvalue of Sigma is {}",
          e.values.min());
  return e;
}

DarkSecondMoment dark_second_moment(const SymEigen& s) {
  DarkSecondMoment f;
  // log sigma - 1/2 log(2 sigma - 1) via log1p of (sigma - 1): no cancellation near sigma = 1 (PosRF).
  const arma::vec e = s.values - 1.0;
  f.c0 = arma::accu(arma::log1p(e) - 0.5 * arma::log1p(2.0 * e));
  f.T = arma::diagmat(1.0 / arma::sqrt(2.0 * s.values - 1.0)) * s.vectors.t();
  return f;
}

ThreePointForm dark_three_point_form(const arma::mat& Sigma) {
  const SymEigen e = validate_dark_proposal(Sigma);
  const arma::mat root = e.vectors * arma::diagmat(arma::sqrt(e.values)) * e.vectors.t();
  return derf_three_point_form(0.25 * (arma::eye(Sigma.n_rows, Sigma.n_rows) - e.mat), root, root);
}

DarkEstimator::DarkEstimator(std::string name, const arma::mat& Sigma, nlohmann::json summary)
    : sigma_(validate_dark_proposal(Sigma)), summary_(std::move(summary)) {
  sqrt_ = sigma_.vectors * arma::diagmat(arma::sqrt(sigma_.values)) * sigma_.vectors.t();
  inv_sqrt_ = sigma_.vectors * arma::diagmat(1.0 / arma::sqrt(sigma_.values)) * sigma_.vectors.t();
  log_det_ = arma::accu(arma::log(sigma_.values));
  form_ = dark_second_moment(sigma_);
  info_.name = std::move(name);
  info_.complex = false;
  info_.positive = true;
  d_ = sigma_.mat.n_rows;
}

arma::mat DarkEstimator::log_var_hook(const PairGram& g) const {
  arma::mat r = pairwise_sq_norm_sum(form_.T * g.X, form_.T * g.Y, 1.0);
  return simd::log_expm1(r, 1.0, form_.c0);  // -inf where c0 + q <= 0: only for Sigma = I and x = -y (exact PosRF pair)
}

Draw DarkEstimator::draw_hook(arma::uword M, Rng& rng, Sampler sampler) const {
  Draw w = Estimator::draw_hook(M, rng, sampler);
  w.omega = sqrt_ * w.omega;
  return w;
}

// features_hook's pieces: P = w, col = -(|w|^2 - |Sigma^-1/2 w|^2) / 4 + log det(Sigma) / 4,
// row = -|x|^2 / 2.
std::optional<FeatureMap::Exponent> DarkEstimator::exponent_hook(const Draw* w, const arma::mat* X, Side) const {
  Exponent e;
  if (w) {
    e.form.col = -0.25 * (arma::sum(arma::square(w->omega), 0) - arma::sum(arma::square(inv_sqrt_ * w->omega), 0));
    e.form.col += 0.25 * log_det_;
    e.form.P = w->omega;
  }
  if (X) e.points = {*X, -0.5 * arma::sum(arma::square(*X), 0).t()};
  return e;
}

arma::mat DarkEstimator::features_hook(const Draw& w, const arma::mat& X, Side, const arma::vec& log_row_scale,
                                       bool log) const {
  // -w^T (I - Sigma^-1) w / 4 = -(|w|^2 - |Sigma^-1/2 w|^2) / 4: the log of the square root of p_I/psi
  // without its normalising constant, which is det(Sigma)^(1/4).
  const arma::rowvec quad =
      -0.25 * (arma::sum(arma::square(w.omega), 0) - arma::sum(arma::square(inv_sqrt_ * w.omega), 0));
  arma::mat F = X.t() * w.omega;
  F.each_row() += quad;
  F.each_col() -= 0.5 * arma::sum(arma::square(X), 0).t();
  F += 0.25 * log_det_;
  return from_exponent(std::move(F), log_row_scale, log);
}

nlohmann::json DarkEstimator::state() const {
  return {{"family", info_.name}, {"Sigma", state::of(sigma_.mat)}, {"summary", summary_}};
}

std::unique_ptr<Estimator> restore_dark(const nlohmann::json& j) {
  return std::make_unique<DarkEstimator>(j["family"].get<std::string>(), state::mat(j, "Sigma"),
                                         j.value("summary", nlohmann::json()));
}

nlohmann::json DarkEstimator::params() const {
  nlohmann::json j = summary_.is_null() ? nlohmann::json::object() : summary_;
  j["family"] = info_.name;
  j["sigma_eigenvalues"] = to_vector(sigma_.values);
  j["c0"] = form_.c0;
  return j;
}

// ---------------------------------------------------------------------------------------------------

MahalanobisPrf MahalanobisPrf::from_factor(const arma::mat& M) {
  require(M.n_rows > 0 && M.n_cols > 0, "Mahalanobis PRF factor M must be nonempty, got {} x {}", M.n_rows, M.n_cols);
  require(M.is_finite(), "Mahalanobis PRF factor M must be finite (found NaN or Inf)");
  return MahalanobisPrf(M);
}

MahalanobisPrf MahalanobisPrf::from_sigma(const arma::mat& Sigma) {
  const SymEigen e = validate_input_covariance(Sigma);
  const arma::uvec keep = arma::find(e.values > 0);
  require(!keep.is_empty(), "Mahalanobis PRF needs Sigma != 0");
  // Rows sqrt(l_i) u_i^T for the nonzero eigenvalues: M^T M = Sigma, r = rank.
  const arma::mat M = arma::diagmat(arma::sqrt(e.values(keep))) * e.vectors.cols(keep).t();
  return MahalanobisPrf(M);
}

arma::mat MahalanobisPrf::log_kernel(const arma::mat& X, const arma::mat& Y) const {
  validate_pair(X, Y, dim());
  return (factor_ * X).t() * (factor_ * Y);
}

arma::mat MahalanobisPrf::log_var_over_k2(const arma::mat& X, const arma::mat& Y) const {
  validate_pair(X, Y, dim());
  arma::mat r = pairwise_sq_norm_sum(factor_ * X, factor_ * Y, 1.0);  // |M (x + y)|^2
  return simd::log_expm1(r);                                          // -inf where v <= 0
}

Draw MahalanobisPrf::draw(arma::uword M, Rng& rng, Sampler sampler) const {
  require(M > 0, "number of features M must be > 0, got 0");
  return Draw{factor_.t() * draw_gaussian_omegas(rank(), M, sampler, rng), {}};
}

arma::mat MahalanobisPrf::features(const Draw& w, const arma::mat& X) const {
  require(w.omega.n_rows == dim(), "draw has dimension {}, Mahalanobis PRF expects {}", w.omega.n_rows, dim());
  validate_points(X, "X");
  require(X.n_rows == dim(), "points have dimension {}, Mahalanobis PRF expects {}", X.n_rows, dim());
  arma::mat F = X.t() * w.omega;
  F.each_col() -= 0.5 * arma::sum(arma::square(factor_ * X), 0).t();
  F -= 0.5 * std::log(static_cast<double>(w.count()));
  return exp_parallel(std::move(F));
}

}  // namespace kestrel
