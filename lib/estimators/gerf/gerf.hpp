// Generalized exponential random features (CRT section 3.1, eq. 4-8, Thm 3.1-3.3) in softmax form:
//   f1(w,x) = D exp(A|w|^2 + B w^T x - s|x|^2/2),  f2(w,y) = D exp(A|w|^2 + s B w^T y - s|y|^2/2),
//   w ~ N(0, I_d), A in C with Re(1-8A) > 0, s = +-1, B = sqrt(s(1-4A)), D = (1-4A)^(d/4).
// TrigRF (A=0, s=-1), PosRF (A=0, s=+1) and OPRF (real A from rho*, s=+1) are members of this family.
#pragma once
#include <complex>
#include <memory>

#include "estimators/estimator.hpp"
#include "estimators/isotropic.hpp"
#include "estimators/three_point.hpp"

namespace kestrel {

struct GerfParams {
  std::complex<double> A{0.0, 0.0};
  int s = 1;  // +1 or -1
};

// Throws unless s = +-1 and Re(1 - 8A) > 0 (the variance is finite only then, CRT Thm 3.2).
void validate(const GerfParams& p);

// log(Var Re(f1 f2) / K^2) for one feature as a function of S = |x + s y|^2. Derived from CRT
// eq. (19)-(21) divided by K^2 = exp(s (S - |x|^2 - |y|^2)), which removes |x|^2, |y|^2:
//   Var/K^2 = Re(e^rho1)/2 + e^rho3/2 - 1,
//   rho1 = d Log(1-4A) - (d/2) Log(1-8A) + s S / (1-8A),
//   rho3 = d log|1-4A| - (d/2) log(1-8 Re A) + (|1-4A| + s Re(1-4A)) S / (1-8 Re A) - s S.
// This is CRT eq. (6) (its alpha_1..alpha_4 check out) rewritten relative to K^2 so that no large
// exponents cancel; confirmed by Monte Carlo in tests/montecarlo_test.cpp. Accurate also where
// Var/K^2 ~ 1e-12 (tiny A, S): checked against 50-digit references in tests/gerf_test.cpp.
double gerf_log_var_over_k2(const GerfParams& p, arma::uword d, double S);

// rho1, rho3 above in cancellation-free forms (log1p of 16 A^2 / (1-8A) and 16 |A|^2 / (1-8 Re A) instead of
// differences of logs that are each ~ d |A|), and Re rho1 + rho3 summed without its cancelling leading terms.
struct GerfExponents {
  std::complex<double> rho1;
  double rho3 = 0;
  double re_rho1_plus_rho3 = 0;
};
GerfExponents gerf_exponents(const GerfParams& p, arma::uword d, double S);

// The three-point form (three_point.hpp) with identity matrices. With p = 1/(1-8A), q = 1 - 8 Re A (the DERF form with
// B1 = B, B2 = s B, B^2 = s(1-4A), C_k = -s/2):
//   holomorphic E[f1^2 f2_j f2_k]/(K_j K_k): a0 = d Log(1-4A) - (d/2) Log(1-8A) (rho1's branch), cx = s p, cxy = p,
//     cy = 2 s A p, cyy = s (1-4A) p;
//   Hermitian E[|f1|^2 f2_j conj f2_k]/(K_j K_k): a0 = d log|1-4A| - (d/2) log q, cx = (|1-4A| + 4 s Re A)/q,
//     cxy = (s |1-4A| + 4 conj A)/q, cy = 2 s conj(A)/q, cyy = |1-4A|/q;
// weights 1/2 each, or the holomorphic term alone with weight 1 when A is real and s = +1 (real features). On the
// diagonal they reduce to rho1 and rho3 above (E_jj = a0 + c S). TrigRF: cx = -1, cxy = 1, cy = 0, cyy = -1 and
// cx = 1, cxy = -1, cy = 0, cyy = 1.
ThreePointForm gerf_three_point_form(const GerfParams& p, arma::uword d);

// The isotropic form (estimators/isotropic.hpp): f1 f2 / K = D^2 e^{-sS/2} exp(2A|w|^2 + B w^T (x + s y)), so
// kappa2 = B^2 / (1 - 4A) = s whatever A is: the mean of a feature given its direction does not depend on A, and
// neither does the covariance of two coupled features (only the single-feature variance does). Confirmed by Monte
// Carlo with complex A in tests/coupled_variance_test.cpp.
IsotropicForm gerf_isotropic_form(const GerfParams& p);

// Homogeneity statistics of a pair of sets (CRT eq. 8), in O(L d).
struct HomogeneityStats {
  arma::uword d = 0;
  double mean_x2 = 0;  // mean |x_i|^2
  double mean_y2 = 0;  // mean |y_j|^2
  double mean_xy = 0;  // mean over all pairs of x_i^T y_j = xbar^T ybar
  double mean_sum_sq(int s) const { return mean_x2 + mean_y2 + 2.0 * s * mean_xy; }  // mean |x + s y|^2
};
HomogeneityStats homogeneity_stats(const arma::mat& X, const arma::mat& Y);

// log(E[Re(f1 f2)^2] / K^2) at the averaged statistics: the objective CRT minimises (eq. 6 with
// averages, appendix 9.10.1). Comparable across s because 2 log K is the same for both s.
double gerf_objective(const GerfParams& p, const HomogeneityStats& st);

// OPRF: A = (1 - 1/rho*)/8, s = +1, rho* from CRT eq. (7) with S = mean |x + y|^2 (Thm 3.3).
GerfParams fit_oprf(const HomogeneityStats& st);
double oprf_rho_star(double S, arma::uword d);

struct GerfFitOptions {
  int max_iter = 400;        // Nelder-Mead iterations per start
  double tolerance = 1e-10;  // simplex size at convergence
};
// GERF: minimises gerf_objective over A in C (Re(1-8A) > 0) for s = -1 and s = +1 (GSL Nelder-Mead
// from a grid of starts) and returns the better one.
GerfParams fit_gerf(const HomogeneityStats& st, const GerfFitOptions& opt = {});

class GerfEstimator final : public Estimator {
 public:
  GerfEstimator(std::string name, arma::uword d, GerfParams p);
  const GerfParams& gerf_params() const { return p_; }
  nlohmann::json params() const override;
  nlohmann::json state() const override;

 protected:
  arma::mat log_var_hook(const PairGram& g) const override;
  std::optional<Exponent> exponent_hook(const Draw* w, const arma::mat* X, Side side) const override;
  std::optional<ThreePointForm> three_point_form_hook() const override { return gerf_three_point_form(p_, dim()); }
  std::optional<IsotropicForm> isotropic_form_hook() const override { return gerf_isotropic_form(p_); }
  arma::mat features_hook(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale,
                          bool log) const override;

 private:
  arma::mat real_exponent(const Draw& w, const arma::mat& X) const;  // real A, s = +1: log of the features
  GerfParams p_;
};

// Factories used by the registry: fit parameters on the pair of sets (X, Y).
std::unique_ptr<Estimator> make_trig(const arma::mat& X, const arma::mat& Y);
std::unique_ptr<Estimator> make_pos(const arma::mat& X, const arma::mat& Y);
std::unique_ptr<Estimator> make_oprf(const arma::mat& X, const arma::mat& Y);
std::unique_ptr<Estimator> make_gerf(const arma::mat& X, const arma::mat& Y);
std::unique_ptr<Estimator> restore_gerf(const nlohmann::json& state);  // trig, pos, oprf, gerf

}  // namespace kestrel
