// Complex exponential random features (HRF eq. 13-18) and the diagonal A of appendix H.2; see cexp.hpp.
#include "estimators/hrf/cexp.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/logmath.hpp"
#include "core/parallel.hpp"
#include "estimators/state.hpp"

namespace kestrel {

using cplx = std::complex<double>;

namespace {

double log_cosh(double b) { return std::abs(b) + std::log1p(std::exp(-2 * std::abs(b))) - M_LN2; }

}  // namespace

double cexp_log_var_over_k2(double a, double b, double c) {
  SignedLog v;
  if (a > 0) v = v + SignedLog::from_log(log_expm1(a) + log_cosh(b));
  if (b > 0) v = v + SignedLog::from_log(log_cosh_minus_one(b));
  const double s = std::sin(c);
  if (s != 0) v = v + SignedLog::from_log(a - b + 2 * std::log(std::abs(s)), -1);
  return v.sign > 0 ? v.log_abs : -kInf;
}

void validate_cexp_matrix(const arma::cx_mat& A, arma::uword d) {
  require(d > 0, "dimension d must be > 0, got 0");
  require(A.n_rows == d && A.n_cols == d, "CE matrix A must be {} x {}, got {} x {}", d, d, A.n_rows, A.n_cols);
  require(A.is_finite(), "CE matrix A must be finite");
  const double rc = arma::rcond(A);
  require(std::isfinite(rc) && rc > 1e-12, "CE matrix A must be invertible, got reciprocal condition number {}", rc);
}

arma::cx_mat cexp_complex_features(const arma::cx_mat& TX, const arma::mat& omega) {
  const arma::cx_mat W = arma::conv_to<arma::cx_mat>::from(omega);
  arma::cx_mat F = TX.st() * W;                               // L x M: w_m^T t_i
  const arma::cx_rowvec sq = arma::sum(arma::square(TX), 0);  // complex squares t^2
  F.each_col() -= 0.5 * sq.st();
  return arma::exp(F);
}

arma::mat cexp_log_var_over_k2_pairs(const arma::cx_mat& AX, const arma::cx_mat& BY) {
  const arma::mat xr = arma::real(AX), xi = arma::imag(AX), yr = arma::real(BY), yi = arma::imag(BY);
  const arma::uword d = AX.n_rows, Lx = AX.n_cols, Ly = BY.n_cols;
  arma::mat out(Lx, Ly);
  for_each_block(Ly, [&](std::size_t j) {
    for (arma::uword i = 0; i < Lx; ++i) {
      double a = 0, b = 0, c = 0;
      for (arma::uword k = 0; k < d; ++k) {
        const double re = xr(k, i) + yr(k, j), im = xi(k, i) + yi(k, j);
        a += re * re, b += im * im, c += re * im;
      }
      out(i, j) = cexp_log_var_over_k2(a, b, c);
    }
  });
  return out;
}

CexpEstimator::CexpEstimator(std::string name, arma::cx_mat A) : A_(std::move(A)) {
  validate_cexp_matrix(A_, A_.n_rows);
  B_ = arma::inv(A_).st();
  info_.name = std::move(name);
  const bool real = arma::all(arma::vectorise(arma::imag(A_)) == 0.0);
  info_.complex = !real;
  info_.positive = real;
  d_ = A_.n_rows;
}

arma::mat CexpEstimator::log_var_hook(const PairGram& g) const {
  return cexp_log_var_over_k2_pairs(A_ * g.X, B_ * g.Y);
}

arma::mat CexpEstimator::features_hook(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale,
                                       bool log) const {
  const arma::cx_mat F = cexp_complex_features((side == Side::Query ? A_ : B_) * X, w.omega);
  if (!info_.complex) return apply_row_scale(arma::real(F), log_row_scale, log);
  return apply_row_scale(arma::join_rows(arma::real(F), (side == Side::Query ? 1.0 : -1.0) * arma::imag(F)),
                         log_row_scale, log);
}

nlohmann::json CexpEstimator::state() const { return {{"family", info_.name}, {"A", state::of(A_)}}; }

nlohmann::json CexpEstimator::params() const {
  std::vector<double> re(A_.n_elem), im(A_.n_elem);
  for (arma::uword k = 0; k < A_.n_elem; ++k) re[k] = A_(k).real(), im[k] = A_(k).imag();
  return {{"family", "cexp"}, {"A_re_colmajor", re}, {"A_im_colmajor", im}};
}

namespace {

double zero_scale(const arma::vec& ri, const arma::vec& rj, const CexpDiagonalOptions& o) {
  require(ri.n_elem == rj.n_elem && ri.n_elem > 0, "centres must have the same non-zero dimension, got {} and {}",
          ri.n_elem, rj.n_elem);
  require(ri.is_finite() && rj.is_finite(), "centres must be finite");
  require(o.large > 0 && o.small > 0 && std::isfinite(o.large) && o.zero_tol >= 0,
          "diagonal options need large, small > 0 and zero_tol >= 0, got {}, {}, {}", o.large, o.small, o.zero_tol);
  return o.zero_tol * std::max({arma::abs(ri).max(), arma::abs(rj).max(), 1e-300});
}

}  // namespace

arma::cx_vec cexp_complex_diagonal(const arma::vec& ri, const arma::vec& rj, const CexpDiagonalOptions& o) {
  const double tol = zero_scale(ri, rj, o);
  arma::cx_vec a(ri.n_elem);
  for (arma::uword k = 0; k < ri.n_elem; ++k) {
    const bool zi = std::abs(ri(k)) <= tol, zj = std::abs(rj(k)) <= tol;
    if (zi && zj)
      a(k) = 1.0;
    else if (zi)
      a(k) = o.large;
    else if (zj)
      a(k) = cplx(o.small, o.small);
    else if (ri(k) * rj(k) > 0)
      a(k) = cplx(0.0, std::sqrt(rj(k) / ri(k)));  // eq. (86)
    else
      a(k) = std::sqrt(-rj(k) / ri(k));  // eq. (87)
  }
  return a;
}

arma::vec cexp_real_diagonal(const arma::vec& ri, const arma::vec& rj, const CexpDiagonalOptions& o) {
  const double tol = zero_scale(ri, rj, o);
  arma::vec a(ri.n_elem);
  for (arma::uword k = 0; k < ri.n_elem; ++k) {
    const bool zi = std::abs(ri(k)) <= tol, zj = std::abs(rj(k)) <= tol;
    if (zi && zj)
      a(k) = 1.0;
    else if (zi)
      a(k) = o.large;
    else
      a(k) = std::clamp(std::sqrt(std::abs(rj(k) / ri(k))), o.small, o.large);  // eq. (88)
  }
  return a;
}

double cexp_loss(const arma::cx_vec& a, const arma::vec& ri, const arma::vec& rj) {
  require(a.n_elem == ri.n_elem && a.n_elem == rj.n_elem, "dimension mismatch in l(A)");
  double l = 0;
  for (arma::uword k = 0; k < a.n_elem; ++k) l += std::norm(a(k) * ri(k) + rj(k) / a(k));
  return l;
}

}  // namespace kestrel
