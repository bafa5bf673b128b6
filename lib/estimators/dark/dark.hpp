// DARK (darkformer.txt): importance-sampled positive random features (eq. 2, Lemma 3.1, Thm 3.2) and
// PRFs with omega ~ N(0, Sigma) for the Mahalanobis kernel exp(q^T Sigma k) (eq. 3, 8; appendix B-C).
//
// 1. Importance-weighted PRF for the SOFTMAX kernel exp(x^T y) with Gaussian proposal psi = N(0, Sigma)
//    (eq. 2). The weight p_I(w)/psi(w) is split symmetrically, so the estimate stays a dot product:
//      f(w, x) = (p_I(w)/psi(w))^(1/2) exp(w^T x - |x|^2/2)
//              = det(Sigma)^(1/4) exp(-w^T (I - Sigma^-1) w / 4 + w^T x - |x|^2/2),   w ~ N(0, Sigma),
//    the same f on queries and keys. E[f(w,x) f(w,y)] = exp(x^T y) for every SPD Sigma.
//    Exact variance of one feature (a Gaussian integral over w; s = x + y):
//      E[f^2(w,x) f^2(w,y)] / K^2 = exp(c0 + s^T (2 Sigma - I)^-1 s),
//      c0 = log det Sigma - 1/2 log det(2 Sigma - I) = sum_i [log sigma_i - 1/2 log(2 sigma_i - 1)] >= 0,
//      Var/K^2 = expm1(c0 + s^T (2 Sigma - I)^-1 s).
//    FINITENESS: the integrand is exp(-w^T (2I - Sigma^-1) w / 2 + 2 w^T s), so the variance is finite
//    for a pair iff every eigenvalue of Sigma^-1 is < 2 (every eigenvalue sigma_i of Sigma is > 1/2);
//    the condition does not depend on x, y (the linear term never breaks integrability). kestrel
//    rejects any Sigma violating it (InvalidArgument), so log_var_over_k2 is finite or -inf (exact:
//    Sigma = I and x = -y, the PosRF case) on every pair and never +inf or NaN.
//    In w = Sigma^(1/2) g, g ~ N(0, I), this is the DERF (DERF Thm 4.1) with A = (I - Sigma)/4,
//    B1 = B2 = Sigma^(1/2), C = -I/2, D = det(Sigma)^(1/4); DERF's 8A < I is exactly sigma_i > 1/2
//    (tests/dark_test.cpp checks the two variance formulas agree).
//    Draws: Draw::omega holds w = Sigma^(1/2) g with g from the chosen sampler (iid, or orthogonal in g:
//    every column of g is marginally N(0, I), so the estimator stays unbiased).
//
// 2. Optimal proposal for q, k ~ N(0, Lambda) (Thm 3.2): Sigma* = (I + 2 Lambda)(I - 2 Lambda)^-1 =
//    U diag((1 + 2 l_i)/(1 - 2 l_i)) U^T, defined iff every eigenvalue l_i of Lambda is < 1/2. For
//    l_max >= 1/2 there is no fallback: E_{q,k}[Var] is infinite for EVERY Gaussian proposal (see 3),
//    so optimal_proposal and make_dark throw InvalidArgument naming l_max. Lambda is estimated as the
//    pooled second moment (X X^T + Y Y^T) / (Lx + Ly): the maximum-likelihood covariance under the
//    zero-mean model of Thm 3.2 (not mean-centred; on uncentred data the mean enters, as it enters B_x).
//
// 3. Expected variance over q, k ~ N(0, Lambda) iid, one feature (closed form, Gaussian integral
//    over (q, k, w)), with B(w) = E_q exp(2 w^T q - |q|^2) = det(I + 2 Lambda)^(-1/2) exp(w^T S w / 2),
//    S = 4 Lambda (I + 2 Lambda)^-1, so that 2I - 2S = 2 Sigma*^-1:
//      E[m2]  = E_{q,k} E_w[(f1 f2)^2] = det(I + 2 Lambda)^-1 det(Sigma)^(1/2) det(H)^(-1/2),
//               H = 2 Sigma*^-1 - Sigma^-1 = 2 (I - 2 Lambda)(I + 2 Lambda)^-1 - Sigma^-1,
//      E[K^2] = E exp(2 q^T k) = det(I - 4 Lambda^2)^(-1/2),
//      E[Var] = E[m2] - E[K^2].
//    FINITENESS: E[K^2] < inf iff l_max < 1/2; E[m2] < inf iff H > 0, i.e. Sigma > Sigma*/2 (Loewner),
//    which needs l_max < 1/2 (and implies the per-pair condition Sigma > I/2). Minimising over Sigma
//    (in P = Sigma^-1 the objective -1/2 log det P - 1/2 log det(2 Sigma*^-1 - P) is strictly convex
//    with gradient zero at P = Sigma*^-1) gives Sigma = Sigma*, E[m2] = det(I - 2 Lambda)^-1 (Thm 3.2).
//    Isotropic Sigma = I (PosRF): E[m2] = det(I + 2 Lambda)^(-1/2) det(I - 6 Lambda)^(-1/2), finite only
//    for l_max < 1/6: for 1/6 <= l_max < 1/2 PosRF's expected variance is infinite while Sigma*'s is
//    finite (Thm 3.2's inequality is then trivially strict).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "estimators/estimator.hpp"
#include "estimators/three_point.hpp"

namespace kestrel {

// A symmetric matrix with its eigendecomposition: mat = vectors diag(values) vectors^T, values ascending.
struct SymEigen {
  arma::mat mat;
  arma::vec values;
  arma::mat vectors;
};

// ---------------------------------------------------------------------------------------------------
// 1. The importance-weighted PRF (DARK eq. 2) for the softmax kernel.

// Checks Sigma is a finite, symmetric (to 1e-10 relative), positive definite d x d matrix whose
// eigenvalues are all > 1/2 (finite variance); returns its (symmetrised) eigendecomposition.
SymEigen validate_dark_proposal(const arma::mat& Sigma);

// log(E[f1^2 f2^2]/K^2) = c0 + |T (x + y)|^2 with T^T T = (2 Sigma - I)^-1 (see the header comment).
struct DarkSecondMoment {
  double c0 = 0.0;
  arma::mat T;  // d x d
};
DarkSecondMoment dark_second_moment(const SymEigen& sigma);

// The three-point form (three_point.hpp): the DERF one with A = (I - Sigma)/4, B1 = B2 = Sigma^(1/2).
ThreePointForm dark_three_point_form(const arma::mat& Sigma);

class DarkEstimator final : public Estimator {
 public:
  // Validates Sigma (validate_dark_proposal). summary is added to params().
  DarkEstimator(std::string name, const arma::mat& Sigma, nlohmann::json summary = {});
  const arma::mat& sigma() const { return sigma_.mat; }
  nlohmann::json params() const override;
  nlohmann::json state() const override;

 protected:
  arma::mat log_var_hook(const PairGram& g) const override;
  std::optional<ThreePointForm> three_point_form_hook() const override { return dark_three_point_form(sigma()); }
  // omega = Sigma^(1/2) g, g (d x M) from the sampler.
  Draw draw_hook(arma::uword M, Rng& rng, Sampler sampler) const override;
  // O(L M d + M d^2): log f = log det(Sigma)/4 - (|w|^2 - |Sigma^-1/2 w|^2)/4 + w^T x - |x|^2/2.
  std::optional<Exponent> exponent_hook(const Draw* w, const arma::mat* X, Side side) const override;
  arma::mat features_hook(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale,
                          bool log) const override;

 private:
  SymEigen sigma_;
  arma::mat sqrt_, inv_sqrt_;  // Sigma^(1/2), Sigma^(-1/2)
  double log_det_ = 0.0;
  DarkSecondMoment form_;
  nlohmann::json summary_;
};

// ---------------------------------------------------------------------------------------------------
// 2. The optimal proposal (Thm 3.2) and its fit from data.

// Checks Lambda is a finite symmetric positive semidefinite d x d matrix (eigenvalues >= -1e-12 of the
// largest |eigenvalue| are rounding noise and are set to 0); returns its eigendecomposition.
SymEigen validate_input_covariance(const arma::mat& Lambda);

// Pooled second moment (X X^T + Y Y^T) / (Lx + Ly) (validates X, Y).
arma::mat pooled_second_moment(const arma::mat& X, const arma::mat& Y);

struct OptimalProposal {
  arma::mat Sigma;   // Sigma* = U diag((1 + 2 l)/(1 - 2 l)) U^T
  arma::vec lambda;  // eigenvalues of Lambda (ascending)
  arma::vec sigma;   // eigenvalues of Sigma*, paired with lambda
  arma::mat U;       // shared eigenvectors
};
// Throws InvalidArgument (naming the largest eigenvalue) unless every eigenvalue of Lambda is < 1/2.
OptimalProposal optimal_proposal(const arma::mat& Lambda);

// The best isotropic proposal Sigma = tau I for q, k ~ N(0, Lambda): the unique root of
// sum_i 1/(2 r_i tau - 1) = d, r_i = (1 - 2 l_i)/(1 + 2 l_i) (stationarity of log E[m2](tau I));
// tau = 1/r when Lambda = l I, so it equals Sigma* for isotropic inputs. Needs l_max < 1/2.
double optimal_isotropic_scale(const arma::mat& Lambda);

struct DarkFitOptions {
  // "optimal": Sigma* of the pooled second moment (Thm 3.2); "isotropic": tau* I (optimal_isotropic_scale).
  std::string kind = "optimal";
};
std::unique_ptr<Estimator> fit_dark(const arma::mat& X, const arma::mat& Y, const DarkFitOptions& opt = {});

// Registry factories: "dark" (Sigma*) and "dark-iso" (tau* I).
std::unique_ptr<Estimator> make_dark(const arma::mat& X, const arma::mat& Y);
std::unique_ptr<Estimator> make_dark_iso(const arma::mat& X, const arma::mat& Y);
std::unique_ptr<Estimator> restore_dark(const nlohmann::json& state);  // dark, dark-iso

// ---------------------------------------------------------------------------------------------------
// 3. Expected variance over Gaussian inputs q, k ~ N(0, Lambda) iid (closed form and Monte Carlo).

// Logs of E[m2], E[K^2] and E[Var] = E[m2] - E[K^2] for one feature (divide by M for M features).
// An infinite expectation is reported as finite = false with the infinite logs set to +inf (this is a
// true value of the integral, not an error); E[Var] = 0 (Lambda = 0, Sigma = I) gives -inf.
struct ExpectedVariance {
  double log_second_moment = 0.0;
  double log_kernel_sq = 0.0;
  double log_variance = 0.0;
  bool finite = true;
};
// Sigma must satisfy validate_dark_proposal; Lambda validate_input_covariance; same d.
ExpectedVariance dark_expected_variance(const arma::mat& Lambda, const arma::mat& Sigma);

// log E_{q,k,g}[(f1 f2)^(2p)] (p >= 1) from the joint Gaussian (q, k, g) (an independent derivation:
// with z = (q, k, g) ~ N(0, Omega), Omega = diag(Lambda, Lambda, I), and w = Sigma^(1/2) g,
// (f1 f2)^(2p) = det(Sigma)^(p) exp(p z^T W z), W = [[-I, 0, R], [0, -I, R], [R, R, I - Sigma]],
// R = Sigma^(1/2); so the moment is det(Sigma)^p det(I - 2p Omega^1/2 W Omega^1/2)^(-1/2) when that
// matrix is positive definite and +inf otherwise). p = 1 is E[m2]; p = 2 finite means the full Monte
// Carlo estimate of E[Var] has finite variance, p = 4 that its standard error is itself reliable.
double dark_log_joint_moment(const arma::mat& Lambda, const arma::mat& Sigma, unsigned p);

struct ExpectedVarianceMcOptions {
  std::size_t samples = 100000;  // N triples (q, k, w)
  std::uint64_t seed = 0;        // stream (seed, MonteCarlo, 0)
};
struct ExpectedVarianceMc {
  std::size_t samples = 0;
  // Full Monte Carlo over (q, k, w): Y = (f1 f2)^2 - K(q,k)^2 has mean E[Var]; also (f1 f2)^2 alone.
  double mean_variance = 0.0, se_variance = 0.0;
  double mean_second_moment = 0.0, se_second_moment = 0.0;
  // The exact single-pair variance expm1(c0 + s^T (2 Sigma - I)^-1 s) K^2 averaged over (q, k).
  double mean_pair_variance = 0.0, se_pair_variance = 0.0;
  // dark_log_joint_moment(.., 4) is finite: every sample mean above has a finite 4th moment, so its
  // standard error is consistent. When false the SEs (and possibly the means) are not trustworthy.
  bool se_reliable = false;
};
ExpectedVarianceMc dark_expected_variance_mc(const arma::mat& Lambda, const arma::mat& Sigma,
                                             const ExpectedVarianceMcOptions& opt = {});

// ---------------------------------------------------------------------------------------------------
// 4. PRFs with omega ~ N(0, Sigma) for the Mahalanobis kernel K_Sigma(q, k) = exp(q^T Sigma k)
//    (DARK eq. 3 and 8, the DARKFormer feature map). Not a softmax-kernel Estimator: it estimates a
//    different kernel. It is exactly PosRF applied to the re-embedded points M x (Sigma = M^T M,
//    w = M^T g: w^T x = g^T (M x), x^T Sigma x = |M x|^2), so every PosRF result carries over:
//      f(w, x) = exp(w^T x - x^T Sigma x / 2),  Var/K_Sigma^2 = expm1((x + y)^T Sigma (x + y)),
//    finite for every PSD Sigma (singular allowed: r = rank Sigma) and all inputs; exact (-inf) iff
//    Sigma (x + y) = 0. Prop. 4.1: E_{N(0,Sigma)}[f f] = E_{N(0,I)}[(p_Sigma/p_I) f f] (tested).

class MahalanobisPrf {
 public:
  // From Sigma (d x d PSD; M = diag(sqrt(eig)) U^T restricted to the nonzero eigenvalues).
  static MahalanobisPrf from_sigma(const arma::mat& Sigma);
  // From a factor M (r x d, finite, r >= 1): Sigma = M^T M.
  static MahalanobisPrf from_factor(const arma::mat& M);

  arma::uword dim() const { return factor_.n_cols; }
  arma::uword rank() const { return factor_.n_rows; }
  const arma::mat& factor() const { return factor_; }
  arma::mat sigma() const { return factor_.t() * factor_; }

  // log K_Sigma(x_i, y_j) = x_i^T Sigma y_j, Lx x Ly.
  arma::mat log_kernel(const arma::mat& X, const arma::mat& Y) const;
  // log(Var[f(w,x) f(w,y)] / K_Sigma^2) for one feature, Lx x Ly; -inf where exact.
  arma::mat log_var_over_k2(const arma::mat& X, const arma::mat& Y) const;
  // omega = M^T g (d x M), g (r x M) from the sampler.
  Draw draw(arma::uword M, Rng& rng, Sampler sampler) const;
  // f(w_m, x_i) / sqrt(M), L x M (the same map on queries and keys).
  arma::mat features(const Draw& w, const arma::mat& X) const;

 private:
  explicit MahalanobisPrf(arma::mat factor) : factor_(std::move(factor)) {}
  arma::mat factor_;  // M, r x d
};

}  // namespace kestrel
