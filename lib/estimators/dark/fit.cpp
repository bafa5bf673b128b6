// DARK's optimal Gaussian proposal Sigma* (darkformer.txt Thm 3.2, appendix A), the best isotropic
// proposal, and the expected variance over Gaussian inputs in closed form and by Monte Carlo; see dark.hpp.
#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/logmath.hpp"
#include "estimators/dark/dark.hpp"

namespace kestrel {

namespace {

SymEigen eig_sym_checked(const arma::mat& A, const char* what) {
  SymEigen e;
  e.mat = 0.5 * (A + A.t());
  if (!arma::eig_sym(e.values, e.vectors, e.mat))
    throw NumericalError(fmt::format("DARK: eigendecomposition of {} failed", what));
  return e;
}

void require_lambda_below_half(const arma::vec& lambda, const char* what) {
  if (!(lambda.max() < 0.5))
    throw Undefined(fmt::format(
        "DARK's optimal proposal Sigma* = (I + 2 Lambda)(I - 2 Lambda)^-1 (Thm 3.2) needs every eigenvalue of "
        "Lambda < 1/2 (otherwise E[Var] is infinite for every Gaussian proposal), but the largest eigenvalue of {} "
        "is {}; scale the inputs down",
        what, lambda.max()));
}

void require_same_dim(const arma::mat& Lambda, const arma::mat& Sigma) {
  require(Lambda.n_rows == Sigma.n_rows, "Lambda and Sigma must have the same dimension, got {} and {}", Lambda.n_rows,
          Sigma.n_rows);
}

}  // namespace

SymEigen validate_input_covariance(const arma::mat& Lambda) {
  const arma::uword d = Lambda.n_rows;
  require(d > 0 && Lambda.n_cols == d, "covariance Lambda must be a nonempty square matrix, got {} x {}", Lambda.n_rows,
          Lambda.n_cols);
  require(Lambda.is_finite(), "covariance Lambda must be finite (found NaN or Inf)");
  const double scale = std::max(1.0, arma::abs(Lambda).max());
  const double asym = arma::abs(Lambda - Lambda.t()).max();
  require(asym <= 1e-10 * scale, "covariance Lambda must be symmetric, got max |Lambda - Lambda^T| = {:.3g}", asym);
  SymEigen e = eig_sym_checked(Lambda, "Lambda");
  const double tol = 1e-12 * std::max(1e-300, arma::abs(e.values).max());
  require(e.values.min() >= -tol, "covariance Lambda must be positive semidefinite, but its smallest eigenvalue is {}",
          e.values.min());
  e.values.clamp(0.0, arma::datum::inf);  // rounding noise of a PSD matrix
  return e;
}

arma::mat pooled_second_moment(const arma::mat& X, const arma::mat& Y) {
  validate_sets(X, Y);
  arma::mat S = (X * X.t() + Y * Y.t()) / static_cast<double>(X.n_cols + Y.n_cols);
  return 0.5 * (S + S.t());
}

OptimalProposal optimal_proposal(const arma::mat& Lambda) {
  const SymEigen e = validate_input_covariance(Lambda);
  require_lambda_below_half(e.values, "Lambda");
  OptimalProposal o;
  o.lambda = e.values;
  o.U = e.vectors;
  // (1 + 2l)/(1 - 2l) = 1/(1 - 2 beta), beta = 2l/(1 + 2l) (appendix A): the eigenvalues of Sigma*.
  o.sigma = (1.0 + 2.0 * e.values) / (1.0 - 2.0 * e.values);
  o.Sigma = o.U * arma::diagmat(o.sigma) * o.U.t();
  o.Sigma = 0.5 * (o.Sigma + o.Sigma.t());
  return o;
}

double optimal_isotropic_scale(const arma::mat& Lambda) {
  const SymEigen e = validate_input_covariance(Lambda);
  require_lambda_below_half(e.values, "Lambda");
  const arma::vec r = (1.0 - 2.0 * e.values) / (1.0 + 2.0 * e.values);  // eigenvalues of Sigma*^-1, in (0, 1]
  const double d = static_cast<double>(r.n_elem);
  auto g = [&](double tau) { return arma::accu(1.0 / (2.0 * r * tau - 1.0)) - d; };
  // E[m2](tau I) is finite iff tau I > Sigma*/2, i.e. tau > 1/(2 r_min); there g falls from +inf to -d,
  // so the root is unique. Every term is <= 1 at tau = 1/r_min (g <= 0) and >= 1 at tau = 1/r_max, so
  // the root lies in [max(1/r_max, 1/(2 r_min)), 1/r_min]. (1/r_max alone can lie below the pole
  // 1/(2 r_min) when sigma*_max > 2 sigma*_min.) Bisection only evaluates g strictly above lo.
  double lo = std::max(1.0 / r.max(), 0.5 / r.min()), hi = 1.0 / r.min();
  if (hi <= lo) return hi;
  for (int it = 0; it < 200 && hi - lo > 1e-15 * hi; ++it) {
    const double mid = 0.5 * (lo + hi);
    (g(mid) > 0 ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

std::unique_ptr<Estimator> fit_dark(const arma::mat& X, const arma::mat& Y, const DarkFitOptions& opt) {
  require(opt.kind == "optimal" || opt.kind == "isotropic", "DARK fit kind must be 'optimal' or 'isotropic', got '{}'",
          opt.kind);
  const arma::mat Lambda = pooled_second_moment(X, Y);
  const SymEigen e = validate_input_covariance(Lambda);
  require_lambda_below_half(e.values, "the pooled second moment (X X^T + Y Y^T)/(Lx + Ly)");
  nlohmann::json j = {{"proposal", opt.kind},
                      {"lambda_min", e.values.min()},
                      {"lambda_max", e.values.max()},
                      {"lambda_mean", arma::mean(e.values)}};
  if (opt.kind == "optimal") {
    const OptimalProposal o = optimal_proposal(Lambda);
    return std::make_unique<DarkEstimator>("dark", o.Sigma, std::move(j));
  }
  const double tau = optimal_isotropic_scale(Lambda);
  j["tau"] = tau;
  const arma::uword d = X.n_rows;
  return std::make_unique<DarkEstimator>("dark-iso", tau * arma::eye(d, d), std::move(j));
}

std::unique_ptr<Estimator> make_dark(const arma::mat& X, const arma::mat& Y) { return fit_dark(X, Y, {"optimal"}); }
std::unique_ptr<Estimator> make_dark_iso(const arma::mat& X, const arma::mat& Y) {
  return fit_dark(X, Y, {"isotropic"});
}

// ---------------------------------------------------------------------------------------------------

ExpectedVariance dark_expected_variance(const arma::mat& Lambda, const arma::mat& Sigma) {
  const SymEigen lam = validate_input_covariance(Lambda);
  const SymEigen sig = validate_dark_proposal(Sigma);
  require_same_dim(Lambda, Sigma);
  const arma::vec& l = lam.values;
  ExpectedVariance ev;
  const bool below_half = l.max() < 0.5;
  ev.log_kernel_sq = below_half ? -0.5 * arma::accu(arma::log1p(-2.0 * l) + arma::log1p(2.0 * l)) : kInf;
  // H = 2 Sigma*^-1 - Sigma^-1; Sigma*^-1 = U diag((1-2l)/(1+2l)) U^T is defined for every l >= 0.
  const arma::mat inv_star = lam.vectors * arma::diagmat((1.0 - 2.0 * l) / (1.0 + 2.0 * l)) * lam.vectors.t();
  const arma::mat inv_sigma = sig.vectors * arma::diagmat(1.0 / sig.values) * sig.vectors.t();
  const SymEigen h = eig_sym_checked(2.0 * inv_star - inv_sigma, "H = 2 Sigma*^-1 - Sigma^-1");
  if (!below_half || h.values.min() <= 0) {
    ev.log_second_moment = kInf;
  } else {
    ev.log_second_moment = -arma::accu(arma::log1p(2.0 * l)) + 0.5 * arma::accu(arma::log(sig.values)) -
                           0.5 * arma::accu(arma::log(h.values));
  }
  ev.finite = std::isfinite(ev.log_second_moment) && std::isfinite(ev.log_kernel_sq);
  if (!ev.finite) {
    ev.log_variance = kInf;
  } else if (ev.log_second_moment > ev.log_kernel_sq) {
    ev.log_variance = log_sub_exp(ev.log_second_moment, ev.log_kernel_sq);
  } else {
    // Var >= 0 pointwise, so E[m2] >= E[K^2]; equality (Lambda = 0, Sigma = I) or rounding at it.
    ev.log_variance = -kInf;
  }
  return ev;
}

double dark_log_joint_moment(const arma::mat& Lambda, const arma::mat& Sigma, unsigned p) {
  require(p >= 1, "moment order p must be >= 1, got {}", p);
  const SymEigen lam = validate_input_covariance(Lambda);
  const SymEigen sig = validate_dark_proposal(Sigma);
  require_same_dim(Lambda, Sigma);
  const arma::uword d = Lambda.n_rows;
  const arma::mat I = arma::eye(d, d);
  const arma::mat Ls = lam.vectors * arma::diagmat(arma::sqrt(lam.values)) * lam.vectors.t();
  const arma::mat R = sig.vectors * arma::diagmat(arma::sqrt(sig.values)) * sig.vectors.t();
  arma::mat W(3 * d, 3 * d, arma::fill::zeros), Os(3 * d, 3 * d, arma::fill::zeros);
  W.submat(0, 0, d - 1, d - 1) = -I;
  W.submat(d, d, 2 * d - 1, 2 * d - 1) = -I;
  W.submat(2 * d, 2 * d, 3 * d - 1, 3 * d - 1) = I - sig.mat;
  W.submat(0, 2 * d, d - 1, 3 * d - 1) = R;
  W.submat(d, 2 * d, 2 * d - 1, 3 * d - 1) = R;
  W.submat(2 * d, 0, 3 * d - 1, d - 1) = R;
  W.submat(2 * d, d, 3 * d - 1, 2 * d - 1) = R;
  Os.submat(0, 0, d - 1, d - 1) = Ls;
  Os.submat(d, d, 2 * d - 1, 2 * d - 1) = Ls;
  Os.submat(2 * d, 2 * d, 3 * d - 1, 3 * d - 1) = I;
  const SymEigen q = eig_sym_checked(arma::eye(3 * d, 3 * d) - 2.0 * p * Os * W * Os, "the joint precision");
  if (q.values.min() <= 0) return kInf;
  return p * arma::accu(arma::log(sig.values)) - 0.5 * arma::accu(arma::log(q.values));
}

ExpectedVarianceMc dark_expected_variance_mc(const arma::mat& Lambda, const arma::mat& Sigma,
                                             const ExpectedVarianceMcOptions& opt) {
  require(opt.samples >= 2, "expected-variance Monte Carlo needs >= 2 samples, got {}", opt.samples);
  const SymEigen lam = validate_input_covariance(Lambda);
  const SymEigen sig = validate_dark_proposal(Sigma);
  require_same_dim(Lambda, Sigma);
  const arma::uword d = Lambda.n_rows;
  const arma::mat Lf = lam.vectors * arma::diagmat(arma::sqrt(lam.values));  // q = Lf z, z ~ N(0, I)
  const arma::mat R = sig.vectors * arma::diagmat(arma::sqrt(sig.values)) * sig.vectors.t();
  const double half_log_det = 0.5 * arma::accu(arma::log(sig.values));
  const DarkSecondMoment form = dark_second_moment(sig);
  const arma::mat ImS = arma::eye(d, d) - sig.mat;

  ExpectedVarianceMc r;
  r.samples = opt.samples;
  r.se_reliable = std::isfinite(dark_log_joint_moment(Lambda, Sigma, 4));
  Rng rng(opt.seed, Stream::MonteCarlo, 0);
  // Per-chunk means and centred sums of squares, merged with Chan et al.'s update (no cancellation).
  double cnt = 0, mean[3] = {0, 0, 0}, m2sum[3] = {0, 0, 0};
  const std::size_t chunk = 4096;
  for (std::size_t done = 0; done < opt.samples; done += chunk) {
    const arma::uword n = static_cast<arma::uword>(std::min(chunk, opt.samples - done));
    const arma::mat Q = Lf * rng.normal_matrix(d, n), K = Lf * rng.normal_matrix(d, n), G = rng.normal_matrix(d, n);
    const arma::mat S = Q + K;
    const arma::rowvec qk = arma::sum(Q % K, 0);
    // log(f1 f2) = log det(Sigma)/2 + g^T (I - Sigma) g / 2 + (R g)^T (q + k) - (|q|^2 + |k|^2)/2.
    const arma::rowvec log_f = half_log_det + 0.5 * arma::sum(G % (ImS * G), 0) + arma::sum((R * G) % S, 0) -
                               0.5 * (arma::sum(arma::square(Q), 0) + arma::sum(arma::square(K), 0));
    const arma::rowvec m2 = arma::exp(2.0 * log_f), k2 = arma::exp(2.0 * qk);
    const arma::rowvec pair = k2 % arma::expm1(form.c0 + arma::sum(arma::square(form.T * S), 0));
    const arma::rowvec ys[3] = {m2 - k2, m2, pair};
    const double nb = static_cast<double>(n), tot = cnt + nb;
    for (int t = 0; t < 3; ++t) {
      if (!ys[t].is_finite()) throw NumericalError("DARK expected-variance Monte Carlo overflowed (Lambda too large)");
      const double mb = arma::mean(ys[t]);
      const double cb = arma::accu(arma::square(ys[t] - mb));
      const double delta = mb - mean[t];
      mean[t] += delta * nb / tot;
      m2sum[t] += cb + delta * delta * cnt * nb / tot;
    }
    cnt = tot;
  }
  double se[3];
  for (int t = 0; t < 3; ++t) se[t] = std::sqrt(m2sum[t] / (cnt - 1) / cnt);
  r.mean_variance = mean[0];
  r.se_variance = se[0];
  r.mean_second_moment = mean[1];
  r.se_second_moment = se[1];
  r.mean_pair_variance = mean[2];
  r.se_pair_variance = se[2];
  return r;
}

}  // namespace kestrel
