// Closed-form parameter fitting of the DERF sub-families minimising the shifted log-variance (8):
// ADERF (Thm 4.2), SDERF (Thm 4.3), SADERF (section 4.3, eq. 12-13); Lemma A.1 for the scalar A.
// The regularisation of singular M1, M2 is described in derf.hpp.
#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "estimators/derf/derf.hpp"

namespace kestrel {

namespace {

std::vector<double> to_vector(const arma::vec& v) { return arma::conv_to<std::vector<double>>::from(v); }

void validate_stats(const DerfStats& st) {
  require(st.d > 0, "dimension d must be > 0, got 0");
  require(st.M1.n_rows == st.d && st.M1.is_square() && st.M2.n_rows == st.d && st.M2.is_square() &&
              st.mu4.n_elem == st.d && st.mu5.n_elem == st.d,
          "DERF statistics must be d x d and d-vectors for d = {}", st.d);
  require(st.M1.is_finite() && st.M2.is_finite() && st.mu4.is_finite() && st.mu5.is_finite(),
          "DERF statistics must be finite (found NaN or Inf)");
}

void validate_options(const DerfFitOptions& opt) {
  require(std::isfinite(opt.ridge) && opt.ridge >= 0, "DERF ridge must be finite and >= 0, got {}", opt.ridge);
}

// eps = ridge * tr(M)/d; a set of all-zero points borrows the other set's scale (1 if both are zero).
double ridge_for(double tr_own, double tr_other, arma::uword d, double ridge) {
  const double scale = tr_own > 0 ? tr_own : (tr_other > 0 ? tr_other : static_cast<double>(d));
  return ridge * scale / static_cast<double>(d);
}

arma::mat sym(const arma::mat& M) { return 0.5 * (M + M.t()); }

}  // namespace

double lemma_a1_minimiser(double phi) {
  require(std::isfinite(phi) && phi >= 0, "Lemma A.1 needs phi >= 0, got {}", phi);
  const double b = 2 * phi + 1;
  const double gamma = 2.0 / (b + std::sqrt(b * b + 8 * phi));  // eq. (19), = 1/(1 - 8A*)
  return (1.0 - 1.0 / gamma) / 8.0;
}

AderfFit fit_aderf(const DerfStats& st, const DerfFitOptions& opt) {
  validate_stats(st);
  validate_options(opt);
  const arma::uword d = st.d;
  const double dd = static_cast<double>(d);
  const arma::mat I = arma::eye(d, d);
  AderfFit f;
  const double tr1 = arma::trace(st.M1), tr2 = arma::trace(st.M2);
  f.eps1 = ridge_for(tr1, tr2, d, opt.ridge);
  f.eps2 = ridge_for(tr2, tr1, d, opt.ridge);
  arma::mat Q1, Q2;
  if (!arma::eig_sym(f.lambda1, Q1, sym(st.M1) + f.eps1 * I) || !arma::eig_sym(f.lambda2, Q2, sym(st.M2) + f.eps2 * I))
    throw NumericalError("ADERF: eigendecomposition of M1 or M2 failed");
  // Thm 4.2 needs M1, M2 nonsingular. Eigenvalues below 1e-12 of the largest are rounding noise.
  for (const auto& [name, lam] : {std::pair{"M1", &f.lambda1}, std::pair{"M2", &f.lambda2}})
    require(lam->min() > 1e-12 * lam->max() && lam->min() > 0,
            "ADERF needs a nonsingular {} = mean of outer products (Thm 4.2: L >= d points spanning R^d); its "
            "eigenvalues range over [{:.3g}, {:.3g}]; use a (larger) ridge > 0",
            name, lam->min(), lam->max());
  const arma::vec s1 = arma::sqrt(f.lambda1), s2 = arma::sqrt(f.lambda2);
  const arma::mat W = arma::diagmat(s1) * Q1.t() * Q2 * arma::diagmat(s2);
  arma::mat U, V;
  if (!arma::svd(U, f.sigma, V, W)) throw NumericalError("ADERF: SVD failed");
  require(f.sigma.min() > 0, "ADERF: singular Lambda1^1/2 Q1^T Q2 Lambda2^1/2 (smallest singular value {})",
          f.sigma.min());
  f.mu3 = st.mu3();
  // phi >= 0 holds exactly (otherwise (10) would be unbounded below as A -> 1/8 while (8) >= 2 d mu3);
  // the clamp only removes rounding noise.
  f.phi = std::max(0.0, 2.0 * arma::mean(f.sigma) + 2.0 * f.mu3);
  f.A = lemma_a1_minimiser(f.phi);
  const double b = std::sqrt(1.0 - 4.0 * f.A);
  const arma::vec rs = arma::sqrt(f.sigma);
  DerfParams& p = f.params;
  p.A = f.A * I;
  p.B1 = b * arma::diagmat(rs) * U.t() * arma::diagmat(1.0 / s1) * Q1.t();
  // As printed: B2 = sqrt(1-4A) Sigma^-1/2 U^T Lambda1^1/2 Q1^T, which equals (1-4A) B1^-T (Thm 4.1 / eq. 20).
  p.B2 = b * arma::diagmat(1.0 / rs) * U.t() * arma::diagmat(s1) * Q1.t();
  p.C1 = -0.5 / (1.0 - 4.0 * f.A) * p.B1.t() * p.B1;
  p.C2 = -0.5 / (1.0 - 4.0 * f.A) * p.B2.t() * p.B2;
  p.log_D = 0.25 * dd * std::log1p(-4.0 * f.A);
  return f;
}

SderfFit fit_sderf(const DerfStats& st) {
  validate_stats(st);
  const arma::uword d = st.d;
  SderfFit f;
  const arma::mat N = sym(st.M1 + st.M2 + st.mu4 * st.mu5.t() + st.mu5 * st.mu4.t());
  arma::mat Q3;
  if (!arma::eig_sym(f.lambda3, Q3, N)) throw NumericalError("SDERF: eigendecomposition failed");
  // N = mean over pairs of (x + y)(x + y)^T is positive semidefinite; negative eigenvalues are rounding.
  f.lambda3 = arma::clamp(f.lambda3, 0.0, arma::datum::inf);
  // Thm 4.3 sorts Lambda3 non-ascending; any order works as long as A_ll is computed from the same
  // Lambda3_ll and B uses the matching column of Q3 (Q3^T N Q3 = Lambda3 in that order).
  f.a.set_size(d);
  for (arma::uword l = 0; l < d; ++l) f.a(l) = lemma_a1_minimiser(f.lambda3(l));
  DerfParams& p = f.params;
  p.A = arma::diagmat(f.a);
  p.B1 = arma::diagmat(arma::sqrt(1.0 - 4.0 * f.a)) * Q3.t();
  p.B2 = p.B1;
  p.C1 = -0.5 * arma::eye(d, d);
  p.C2 = p.C1;
  p.log_D = 0.25 * arma::accu(arma::log1p(-4.0 * f.a));
  return f;
}

SaderfFit fit_saderf(const DerfStats& st, const DerfFitOptions& opt) {
  validate_stats(st);
  validate_options(opt);
  const arma::uword d = st.d;
  SaderfFit f;
  const arma::vec sx0 = st.M1.diag(), sy0 = st.M2.diag();  // mean x_l^2, mean y_l^2
  f.eps1 = ridge_for(arma::accu(sx0), arma::accu(sy0), d, opt.ridge);
  f.eps2 = ridge_for(arma::accu(sy0), arma::accu(sx0), d, opt.ridge);
  const arma::vec sx = sx0 + f.eps1, sy = sy0 + f.eps2;
  f.psi.set_size(d);
  for (arma::uword l = 0; l < d; ++l) {
    if (sx(l) == 0 && sy(l) == 0) {
      f.psi(l) = 1.0;  // coordinate zero in both sets: (13) does not depend on Psi_ll
      continue;
    }
    require(sx(l) > 0 && sy(l) > 0,
            "SADERF: coordinate {} is zero in every {} but not in every {}, so Psi_ll = (sum y_l^2 / sum x_l^2)^(1/4) "
            "is {}; use a ridge > 0",
            l, sx(l) == 0 ? "x" : "y", sx(l) == 0 ? "y" : "x", sx(l) == 0 ? "infinite" : "zero");
    f.psi(l) = std::pow(sy(l) / sx(l), 0.25);  // section 4.3
  }
  const arma::vec psi2 = arma::square(f.psi);
  f.transformed.d = d;
  f.transformed.mean_x2 = arma::dot(psi2, sx);        // mean |Psi x|^2
  f.transformed.mean_y2 = arma::dot(1.0 / psi2, sy);  // mean |Psi^-1 y|^2
  f.transformed.mean_xy = arma::dot(st.mu4, st.mu5);  // (Psi x)^T (Psi^-1 y) = x^T y
  f.gerf = fit_oprf(f.transformed);
  const double a = f.gerf.A.real();
  const double b = std::sqrt(1.0 - 4.0 * a);
  DerfParams& p = f.params;
  p.A = a * arma::eye(d, d);
  p.B1 = b * arma::diagmat(f.psi);
  p.B2 = b * arma::diagmat(1.0 / f.psi);
  p.C1 = -0.5 * arma::diagmat(psi2);
  p.C2 = -0.5 * arma::diagmat(1.0 / psi2);
  p.log_D = 0.25 * static_cast<double>(d) * std::log1p(-4.0 * a);
  return f;
}

std::unique_ptr<Estimator> make_aderf(const arma::mat& X, const arma::mat& Y) {
  const AderfFit f = fit_aderf(derf_stats(X, Y));
  nlohmann::json j = {{"A", f.A},
                      {"phi", f.phi},
                      {"mu3", f.mu3},
                      {"sigma_mean", arma::mean(f.sigma)},
                      {"sigma_min", f.sigma.min()},
                      {"sigma_max", f.sigma.max()},
                      {"ridge", {f.eps1, f.eps2}},
                      {"B1_fro", arma::norm(f.params.B1, "fro")},
                      {"B2_fro", arma::norm(f.params.B2, "fro")}};
  return std::make_unique<DerfEstimator>("aderf", f.params, std::move(j));
}

std::unique_ptr<Estimator> make_sderf(const arma::mat& X, const arma::mat& Y) {
  const SderfFit f = fit_sderf(derf_stats(X, Y));
  nlohmann::json j = {{"A_diag", to_vector(f.a)},
                      {"lambda3_min", f.lambda3.min()},
                      {"lambda3_max", f.lambda3.max()},
                      {"lambda3_sum", arma::accu(f.lambda3)}};
  return std::make_unique<DerfEstimator>("sderf", f.params, std::move(j));
}

std::unique_ptr<Estimator> make_saderf(const arma::mat& X, const arma::mat& Y) {
  const SaderfFit f = fit_saderf(derf_stats(X, Y));
  nlohmann::json j = {{"A", f.gerf.A.real()}, {"psi", to_vector(f.psi)}, {"ridge", {f.eps1, f.eps2}}};
  return std::make_unique<DerfEstimator>("saderf", f.params, std::move(j));
}

}  // namespace kestrel
