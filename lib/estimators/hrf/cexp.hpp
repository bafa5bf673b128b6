// Complex exponential (CE) random features, HRF section 2.3, eq. (13)-(18):
//   f1(w,x) = exp(-(Ax)^2/2 + w^T A x),  f2(w,y) = exp(-(By)^2/2 + w^T B y),  B = (A^T)^-1,
// w ~ N(0, I_d), A in C^{d x d} invertible, z^2 = sum_k z_k^2 (a complex square, not |z|^2).
// E f1 f2 = exp(x^T y) by Lemma 2.4; kestrel's estimate is Re(f1 f2) (README: a complex feature counts
// as one feature). A = iI is TrigRF, A = I is the one-sided PosRF. Also the diagonal choices of A for
// a pair of centres (HRF appendix H.2, eq. 85-88).
#pragma once
#include <complex>
#include <memory>

#include "estimators/estimator.hpp"

namespace kestrel {

// log(Var Re(f1 f2) / K^2) for one feature as a function of u = Ax + By in C^d:
//   E f1 f2 = K, E (f1 f2)^2 = K^2 e^{u^2}, E |f1 f2|^2 = K^2 e^{|u|^2}, so with a = |Re u|^2,
//   b = |Im u|^2, c = Re u . Im u:  Var/K^2 = (Re e^{u^2} + e^{|u|^2})/2 - 1
//   = expm1(a) cosh(b) + (cosh(b) - 1) - e^{a-b} sin^2(c)   (summed in log domain, no overflow).
// Zero (log = -inf) iff u = 0, i.e. eq. (17)-(18). Trig (a = 0, c = 0): cosh b - 1; PosRF (b = 0): e^a - 1.
double cexp_log_var_over_k2(double a, double b, double c);

// Throws unless A is a finite, square d x d, invertible (reciprocal condition number > 1e-12) matrix.
void validate_cexp_matrix(const arma::cx_mat& A, arma::uword d);

class CexpEstimator final : public Estimator {
 public:
  CexpEstimator(std::string name, arma::cx_mat A);
  const arma::cx_mat& A() const { return A_; }
  const arma::cx_mat& B() const { return B_; }
  nlohmann::json params() const override;
  nlohmann::json state() const override;

 protected:
  arma::mat log_var_hook(const PairGram& g) const override;
  // Real A: L x M positive features. Complex A: L x 2M, [Re f, Im f] (Query), [Re f, -Im f] (Key).
  arma::mat features_hook(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale,
                          bool log) const override;

 private:
  arma::cx_mat A_, B_;
};

// Shared kernels of the CE family for already transformed points TX = A X (or B Y), d x L complex:
// features exp(-(t)^2/2 + w^T t) of every column t, L x M complex (FeatureMap::features applies the 1/sqrt(M)).
arma::cx_mat cexp_complex_features(const arma::cx_mat& TX, const arma::mat& omega);
// log(Var/K^2) of one feature for all pairs u_ij = AX_i + BY_j (Lx x Ly), summed coordinate-wise
// directly (no cancellation at u = 0, where the estimator is exact).
arma::mat cexp_log_var_over_k2_pairs(const arma::cx_mat& AX, const arma::cx_mat& BY);

// Diagonal A for a pair of centres (ri: query centre, rj: key centre), HRF appendix H.2.
struct CexpDiagonalOptions {
  double zero_tol = 1e-12;  // |r_k| <= zero_tol * max(|ri|_inf, |rj|_inf, 1e-300) counts as 0
  double large = 1e3;       // a_k when the query coordinate is 0 and the key coordinate is not
  double small = 1e-3;      // a_k when the key coordinate is 0 and the query coordinate is not
};
// Complex diagonal (eq. 85-87): a_k = i sqrt(rj_k / ri_k) if ri_k rj_k > 0, sqrt(-rj_k / ri_k) if < 0,
// so a_k ri_k + rj_k / a_k = 0 and the CE estimator is exact at (ri, rj); degenerate coordinates: 1 if
// both are 0, `large` if only ri_k = 0, `small` (1 + i) if only rj_k = 0 (as the paper suggests).
arma::cx_vec cexp_complex_diagonal(const arma::vec& ri, const arma::vec& rj, const CexpDiagonalOptions& o = {});
// Real diagonal (eq. 88): a_k = sqrt(|rj_k / ri_k|), minimising |A ri + A^-1 rj|^2 over real diagonal A;
// a_k is clamped to [small, large] (eq. 88 gives a_k = 0, a singular A, when rj_k = 0).
arma::vec cexp_real_diagonal(const arma::vec& ri, const arma::vec& rj, const CexpDiagonalOptions& o = {});
// l(A) = |A ri + (A^T)^-1 rj|^2 (eq. 21) for a diagonal A.
double cexp_loss(const arma::cx_vec& a, const arma::vec& ri, const arma::vec& rj);

}  // namespace kestrel
