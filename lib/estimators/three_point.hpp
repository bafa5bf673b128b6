// The three-point second moment of a Gaussian-projection family, the quantity behind the exact variance of K-hat C
// (analysis/operator_variance.hpp). For features f1, f2 of w ~ N(0, I_d) whose logs are quadratic in w (DERF Thm 4.1:
// PosRF, GERF/OPRF, TrigRF, ADERF/SDERF/SADERF, DARK), one row of K-hat C built from one feature is
// Re(f1(w,x) sum_j C_j f2(w,y_j)), and its second moment is a Gaussian integral:
//   E[(Re f1(w,x) sum_j C_j f2(w,y_j))^2] = sum_t weight_t Re sum_{j,k} w_j w_k exp(E^t_jk),   w_j = C_j K(x, y_j),
//   E^t_jk = log(E[...] / (K(x,y_j) K(x,y_k))) = alpha(x) + beta(x, y_j) + beta'(x, y_k) + Gamma(y_j, y_k),
//   alpha = a0 + cx x^T Mx x,  beta(x,y) = cxy x^T Mxy y + cy y^T My y,  Gamma(y,y') = cyy y^T Myy y',
// beta' = beta, or its complex conjugate for a Hermitian term (E[|f1|^2 f2(y_j) conj f2(y_k)] of complex features).
// Real features have one term of weight 1; complex ones (Re f1 f2) the holomorphic and the Hermitian term with
// weight 1/2 each (E[(Re Z)^2] = Re E[Z^2]/2 + E|Z|^2/2); the real TrigRF (cos form) weights 1/2 and 1.
// The family-specific builders (derf.hpp, gerf.hpp, trig_real.hpp, dark.hpp) derive the coefficients; the registry
// reaches them through the estimator (Estimator::three_point_form_hook, overridden in the family folder).
#pragma once
#include <complex>
#include <vector>

#include <armadillo>

namespace kestrel {

struct ThreePointTerm {
  double weight = 1;
  bool hermitian = false;
  std::complex<double> a0{0, 0}, cx{1, 0}, cxy{1, 0}, cy{1, 0}, cyy{1, 0};
  // d x d real matrices; an empty matrix stands for the identity. Myy is symmetric positive semidefinite, so that
  // |Re Gamma_jk| <= (|Gamma_jj| + |Gamma_kk|) / 2 (the scaling of analysis/operator_variance.cpp relies on it).
  arma::mat Mx, Mxy, My, Myy;
  bool real() const;  // every coefficient real: evaluated in real arithmetic
};

struct ThreePointForm {
  std::vector<ThreePointTerm> terms;
  double total_weight() const;  // 1 for every unbiased family except the cos-form TrigRF (3/2)
};

// The DERF parametrisation f_k = D exp(w^T A w + w^T B_k x + x^T C_k x) with Thm 4.1's relations (real A symmetric,
// 8A < I, B1^T (I-4A)^-1 B2 = I, C_k = -B_k^T (I-4A)^-1 B_k / 2, D^4 = det(I-4A)). With a = B1 x, b = B2 y,
// P = (I-8A)^-1, R = (I-4A)^-1 (which commute, 2P - R = PR, P - R = 4APR), the Gaussian integral gives
//   E_jk = c0 + a^T PR a + a^T PR (b_j + b_k) + (b_j^T 4APR b_j + b_k^T 4APR b_k)/2 + b_j^T P b_k,
//   c0 = log det(I-4A) - log det(I-8A)/2,
// which on the diagonal j = k is DERF's c0 + |T(B1 x + B2 y)|^2 (derf.hpp). One real term.
ThreePointForm derf_three_point_form(const arma::mat& A, const arma::mat& B1, const arma::mat& B2);

}  // namespace kestrel
