// Exact variance of K-hat C, the product a user actually computes (attention numerators and normalisers, kernel
// regression): for an estimator averaging M iid features, row i of K-hat C is (1/M) sum_m Re f1(w_m, x_i) g(w_m),
// g(w) = sum_j C_j f2(w, y_j), so for columns a, b of C (Ly x n)
//   M Cov((K-hat C)_ia, (K-hat C)_ib) = E[Re(f1 g_a) Re(f1 g_b)] - (KC)_ia (KC)_ib
//                                     = sum_t weight_t Re sum_{j,k} w_ja w_kb (exp(E^t_jk) - 1) + (W - 1)(KC)_ia
//                                     (KC)_ib
// with w_ja = C_ja K(x_i, y_j), W = sum_t weight_t and E^t_jk = alpha + beta_j + beta'_k + Gamma_jk the family's
// three-point form (estimators/three_point.hpp). Where every |Gamma_jk| <= 1 (the regime of small inputs, where
// variances can be tiny against K^2), two exact rewrites keep it accurate and BLAS-shaped:
//   exp(E_jk) - 1 = e^{alpha + beta_j + beta'_k} expm1(Gamma_jk) + (e^{alpha + beta_j + beta'_k} - 1),
//   sum_jk w_ja w_kb (e^{alpha + beta_j + beta'_k} - 1) = delta_a u'_b + s_a delta'_b,
//   s_a = sum_j w_ja = (KC)_ia,  delta_a = sum_j w_ja expm1(alpha/2 + beta_j),  u'_b = s_b + delta'_b,
// so near-zero variances (tiny inputs: every exponent small) come from expm1 terms, never from a difference of two
// nearly equal second moments. Elsewhere those two parts would be huge and cancel, and the second moment
// sum_jk w_ja w_kb e^{E_jk} less (KC)_a (KC)_b is used, with G = e^Gamma below. The first part is z_a^T G z'_b,
// z_ja = w_ja e^{beta_j}, G = expm1(Gamma): an
// Lx x Ly x Ly product evaluated in tiles with BLAS. Log domain throughout: row i is scaled by its largest
// exponent, and G by e^{-(nu_j + nu_k)/2}, nu_j = |Gamma_jj| (which bounds |Re Gamma_jk| since Myy is semidefinite),
// with z scaled by e^{+nu_j/2}, so every exponentiated number is at most O(1) and results from e^-300 to e^+300
// (and beyond) stay exact. Work O(Lx Ly^2 n + Lx Ly (d + n^2)); memory O(block Ly) per row block (512 rows), never
// Lx x Ly or Ly x Ly: key tiles of 256, folded in tile order whatever the thread count.
// Confirmed by Monte Carlo against the simulator's K-hat C (tests/operator_variance_test.cpp, and the contract suite
// for every family with a form).
#pragma once
#include <armadillo>

#include "estimators/three_point.hpp"
#include "kernels/kernel.hpp"

namespace kestrel {

// A matrix of real numbers as log|v| and sign (-1, 0, +1): values far outside double's range.
struct SignedLogCube {
  arma::cube log_abs;
  arma::Cube<int> sign;
};

struct KcMoments {
  arma::mat log_abs_kc;  // log |(K C)_ia|, Lx x n (-inf where it is 0)
  arma::imat sign_kc;    // its sign
  // Cov((K-hat C)_ia, (K-hat C)_ib) of the M-feature estimate: slice i is row i's n x n covariance. The diagonal is
  // the variance (sign 0 and log -inf where the estimate is exact).
  SignedLogCube cov;
  arma::mat log_var() const;  // log Var((K-hat C)_ia), Lx x n
};

// Exact moments of K-hat C for the estimator with this three-point form, for the kernel k (the form is relative to
// the kernel, so any scaled softmax kernel K^(alpha) works), M iid features. X: d x Lx queries, Y: d x Ly keys,
// C: Ly x n. rows: the query rows to compute (row r of the result is query rows[r]; analysis/row_sample.hpp draws a
// seeded sample), empty for all: each row is computed exactly as in the full computation, in O(Ly^2 n) work and
// O(Ly) memory per row (long context: 512 rows of Ly = 131072 keys). Throws InvalidArgument for invalid sets, C of
// the wrong shape, non-finite C, or rows out of range or repeated.
KcMoments kc_moments(const ThreePointForm& form, const Kernel& k, const arma::mat& X, const arma::mat& Y,
                     const arma::mat& C, arma::uword M = 1, const arma::uvec& rows = {});

// What the ratio rows (K-hat V)_i / (K-hat 1)_i need (analysis/attention_variance.hpp), with C = [V, 1] (n = dv + 1
// columns): (K C)_i, Cov((K-hat C)_ia, (K-hat 1)_i) for every a, and the trace sum_a Var((K-hat V)_ia). The trace is
// sum_jk z_j (G o H)_jk z'_k with H = V V^T, so the work is two Lx x Ly x Ly products per term whatever dv is, against
// kc_moments' n of them (a 33x saving at dv = 64). Same accuracy and scaling as kc_moments, which it matches
// (tests/operator_variance_test.cpp). rows as in kc_moments; the work per row is O(Ly^2) whatever dv is (the G and H
// tiles, O(Ly^2 (d + dv)), are shared by blocks of 512 rows).
struct RatioMoments {
  arma::mat log_abs_kc;  // log |(K C)_ia|, Lx x n
  arma::imat sign_kc;
  arma::mat log_abs_cov;  // log |Cov((K-hat C)_ia, (K-hat 1)_i)|, Lx x n; column dv is Var (K-hat 1)_i
  arma::imat sign_cov;
  arma::vec log_trace;  // log sum_{a < dv} Var((K-hat V)_ia), Lx (-inf where 0)
};
RatioMoments ratio_moments(const ThreePointForm& form, const Kernel& k, const arma::mat& X, const arma::mat& Y,
                           const arma::mat& V, arma::uword M = 1, const arma::uvec& rows = {});

}  // namespace kestrel
