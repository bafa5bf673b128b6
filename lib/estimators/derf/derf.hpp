// Dense-exponential random features (DERF paper section 4, Thm 4.1 eq. 9) for the softmax kernel,
//   f_k(w, x) = D exp(w^T A w + w^T B_k x + x^T C_k x),  w ~ N(0, I_d),  k = 1 (queries), 2 (keys),
// and the fitted sub-families ADERF (Thm 4.2, eq. 10), SDERF (Thm 4.3, eq. 11) and SADERF (section 4.3).
//
// Singular second moments (real data with constant pixels, L < d): ADERF needs M1 = mean x x^T and
// M2 = mean y y^T nonsingular. kestrel fits the *regularised* problem with M_k replaced by
// M_k + eps_k I, eps_k = ridge * tr(M_k) / d (DerfFitOptions::ridge, default 1e-8; a set whose points
// are all zero borrows the other set's trace, and eps = ridge when both are zero). This is exactly the
// objective (8) for the data smoothed by independent N(0, eps_k I) noise (the statistics M_k, mu enter
// the ADERF objective linearly and smoothing adds eps_k I to M_k and leaves the means alone), so
//   * the returned parameters satisfy Thm 4.1 exactly (up to rounding) and every variance is finite;
//   * the optimum is that of a well-posed problem: F(theta_fit) <= F(theta) + penalty(theta) for every
//     ADERF theta, where penalty(theta) = eps_1 tr(G_1) + eps_2 tr(G_2) >= 0 (G_k as in derf_objective);
//     on nonsingular data the fit moves by O(ridge), on singular data the infimum (not attained) is
//     approached to O(sqrt(ridge)).
// SADERF uses the same eps_k on the diagonal statistics (its Psi_ll would otherwise be 0 or infinite for
// a coordinate that is zero in every x or every y). SDERF needs no regularisation (Thm 4.3 has no
// nonsingularity condition). ridge = 0 gives the printed theorems; ADERF then throws InvalidArgument on
// singular M_k and SADERF on a coordinate that is zero in one set only.
#pragma once
#include <memory>
#include <string>

#include "estimators/estimator.hpp"
#include "estimators/gerf/gerf.hpp"

namespace kestrel {

// DERF parameters; D is carried as log D (det(I - 4A)^(1/4) over- or underflows for large d).
struct DerfParams {
  arma::mat A;         // d x d symmetric, 8A < I
  arma::mat B1, B2;    // d x d
  arma::mat C1, C2;    // d x d
  double log_D = 0.0;  // log D
  arma::uword dim() const { return A.n_rows; }
};

// Throws InvalidArgument unless the parameters satisfy Thm 4.1: square d x d finite matrices, A
// symmetric, 8A < I (strictly), B1^T (I-4A)^-1 B2 = I, C_k = -1/2 B_k^T (I-4A)^-1 B_k,
// log D = 1/4 log det(I - 4A). The equalities are checked to tol relative to their natural scale
// (|B1| |(I-4A)^-1| |B2| for the identity condition, the size of the right-hand side otherwise).
void validate(const DerfParams& p, double tol = 1e-9);

// Builds the DERF determined by A and B1 through Thm 4.1: B2 = (I-4A) B1^-T, C_k, D.
DerfParams derf_from_a_b1(const arma::mat& A, const arma::mat& B1);

// Eq. (9) rewritten with Thm 4.1's relations so that no large terms cancel:
//   log(E[f1^2 f2^2] / K^2) = c0 + |T (B1 x + B2 y)|^2,
//   c0 = log det(I-4A) - 1/2 log det(I-8A) >= 0,   T^T T = (I-8A)^-1 (I-4A)^-1,
// since 2(C_k + B_k^T (I-8A)^-1 B_k) = B_k^T T^T T B_k and 4 B1^T (I-8A)^-1 B2 - 2I = 2 B1^T T^T T B2.
// Var/K^2 = exp(c0 + |T(B1 x + B2 y)|^2) - 1, which is 0 (log = -inf) only where that exponent is 0.
struct DerfSecondMoment {
  double c0 = 0.0;
  arma::mat TB1, TB2;  // T B1, T B2
};
DerfSecondMoment derf_second_moment(const DerfParams& p);

// Statistics of a pair of sets that the DERF objective (8) depends on, O(L d^2).
struct DerfStats {
  arma::uword d = 0;
  arma::mat M1, M2;                                                            // mean x x^T, mean y y^T (Thm 4.2)
  arma::vec mu4, mu5;                                                          // mean x, mean y (Thm 4.3)
  double mu3() const { return arma::dot(mu4, mu5) / static_cast<double>(d); }  // Thm 4.2
};
DerfStats derf_stats(const arma::mat& X, const arma::mat& Y);

struct DerfFitOptions {
  double ridge = 1e-8;  // relative ridge for ADERF / SADERF (see the header comment); 0 = as printed
};

struct AderfFit {
  DerfParams params;
  double A = 0.0;              // the scalar A (params.A = A I)
  arma::vec sigma;             // singular values Sigma_ll (descending)
  arma::vec lambda1, lambda2;  // eigenvalues of the (regularised) M1, M2
  double mu3 = 0.0;
  double phi = 0.0;               // 2 mean(Sigma) + 2 mu3 (Thm 4.2)
  double eps1 = 0.0, eps2 = 0.0;  // ridges added to M1, M2
};
AderfFit fit_aderf(const DerfStats& st, const DerfFitOptions& opt = {});

struct SderfFit {
  DerfParams params;
  arma::vec a;        // diagonal of A, paired with lambda3
  arma::vec lambda3;  // eigenvalues of M1 + mu4 mu5^T + mu5 mu4^T + M2
};
SderfFit fit_sderf(const DerfStats& st);

struct SaderfFit {
  DerfParams params;
  arma::vec psi;                 // diagonal of Psi
  GerfParams gerf;               // the (real, s = +1) GERF on (Psi x, Psi^-1 y)
  HomogeneityStats transformed;  // its homogeneity statistics (with the ridge on the diagonals)
  double eps1 = 0.0, eps2 = 0.0;
};
SaderfFit fit_saderf(const DerfStats& st, const DerfFitOptions& opt = {});

// The A of Lemma A.1 minimising log(1-4A) - 1/2 log(1-8A) + phi/(1-8A), phi >= 0, in the
// cancellation-free form A = (1 - 1/gamma)/8, gamma = 2 / (2 phi + 1 + sqrt((2 phi + 1)^2 + 8 phi)) (eq. 19).
double lemma_a1_minimiser(double phi);

class DerfEstimator final : public Estimator {
 public:
  // Validates p (Thm 4.1, tolerance tol). summary goes into params(); empty: A's eigenvalues and norms.
  DerfEstimator(std::string name, DerfParams p, nlohmann::json summary = {}, double tol = 1e-9);
  const DerfParams& derf_params() const { return p_; }
  nlohmann::json params() const override;
  nlohmann::json state() const override;

 protected:
  arma::mat log_var_hook(const PairGram& g) const override;
  std::optional<ThreePointForm> three_point_form_hook() const override {
    return derf_three_point_form(p_.A, p_.B1, p_.B2);
  }
  // O(L (M d + d^2) + M d^2): B_k^T w and x^T C_k x are formed once per omega and per point.
  std::optional<Exponent> exponent_hook(const Draw* w, const arma::mat* X, Side side) const override;
  arma::mat features_hook(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale,
                          bool log) const override;

 private:
  DerfParams p_;
  DerfSecondMoment form_;
  nlohmann::json summary_;
};

// Factories used by the registry: fit on (X, Y) with default options.
std::unique_ptr<Estimator> make_aderf(const arma::mat& X, const arma::mat& Y);
std::unique_ptr<Estimator> make_sderf(const arma::mat& X, const arma::mat& Y);
std::unique_ptr<Estimator> make_saderf(const arma::mat& X, const arma::mat& Y);
std::unique_ptr<Estimator> restore_derf(const nlohmann::json& state);  // aderf, sderf, saderf

}  // namespace kestrel
