// Exact variance of random-feature kernel estimators whose Gaussian projections are coupled in blocks of d:
// block-orthogonal (CRT appendix 9.1, Thm 4.1) and simplex (Reid et al. 2023), for every family with an isotropic
// form (estimators/isotropic.hpp: the GERF family, i.e. TrigRF, PosRF, OPRF and complex GERF). Implements
//   Var(K-hat_M) / K^2 = (M V1 + P Cov_c) / M^2,   P = sum over blocks of n_b (n_b - 1),                 (1)
// with V1 the single-feature Var/K^2 (the family's log_var_over_k2, CRT eq. 6 for GERF) and Cov_c below.
//
// Derivation. Write w_m = r_m u_m: within a block the norms r_m are iid chi(d), independent of the directions, and
// every pair of directions is a Haar-rotated pair with a fixed cosine c (c = 0 orthogonal, c = -1/(d-1) simplex).
// Given the directions the features are independent, so with H the conditional mean of the isotropic form,
//   Cov_c = Cov(Re g(w1), Re g(w2)) / K^2 = E[H(u1^T z) H(u2^T z)] - 1.
// For kappa2 > 0 (write S for |kappa2| S, sigma = sign kappa2): H(u^T z) H(u'^T z) e^{S} = E_r exp(a^T z) with
// a = r1 u1 + r2 u2; rotating z uniformly, E_zhat e^{a^T z} = 0F1(; d/2; S |a|^2 / 4), |a|^2 = r1^2 + r2^2 + 2c r1 r2.
// In polar coordinates r1 = rho cos theta, r2 = rho sin theta (density prop. to (r1 r2)^(d-1) e^{-rho^2/2}) the
// radial integral is a Laplace transform, int u^(d-1) e^-u 0F1(; d/2; k u) du = Gamma(d) 1F1(d; d/2; k), and with
// v = sin 2theta = 2 r1 r2 / (r1^2 + r2^2),
//   E[H H] = E_v[ e^{-S} M(d, d/2, y0 (1 + c v)) ],                                        y0 = S/2,          (2)
// v having density v^(d-1) (1-v^2)^(-1/2) / W_d on [0, 1], W_d = sqrt(pi) Gamma(d/2) / (2 Gamma((d+1)/2)), and
// M = 1F1 (Kummer). For kappa2 < 0, cos a cos b = (cos(a+b) + cos(a-b))/2 and 0F1(; d/2; -x) give
//   E[H H] = E_v[ e^{S} (M(d, d/2, -y0 (1 + c v)) + M(d, d/2, -y0 (1 - c v))) / 2 ].                             (3)
// (Checked against Monte Carlo and a direct mpmath quadrature in scripts/coupled_reference.py; the formula holds
// for every d >= 2, d = 2 included: no projected-disc density is involved.) Kummer's transformation
// M(d, d/2, y) = e^y M(-d/2, d/2, -y) turns the 1F1 into a Poisson mixture: with
//   Pi_k = prod_{j<k} (d/2 - j) / (d/2 + j)   (|Pi_k| <= 1; Pi_k = 0 for k > d/2 when d is even),
//   T1(lambda) = E_{k~Poisson(lambda)} [1 - Pi_k] >= 0,    T2(lambda) = E_{k~Poisson(lambda)} [(-1)^k (1 - Pi_k)],
// (2) and (3) become, with x = S c v and y_+- = S (1 +- c v) / 2,
//   kappa2 > 0:  Cov_c = E_v[ expm1(x) - e^x T1(y_+) ],                                                            (4)
//   kappa2 < 0:  Cov_c = E_v[ cosh(x) - 1 - e^S (T2(y_+) + T2(y_-)) / 2 ].                                        (5)
// Orthogonal blocks (c = 0) need no integral: Cov_0 = -T1(S/2) and -e^S T2(S/2).
// Consequences: (i) for positive features Cov_0 = -T1 <= 0, so Var_ort <= Var_iid for every d and M (CRT Thm 4.1,
// here with the exact gap, also for partial blocks and complex A with s = +1); (ii) M(d, d/2, .) has positive
// Taylor coefficients, so (2) increases with c and simplex (the smallest common cosine) <= orthogonal for positive
// features (Reid et al.'s claim); (iii) for kappa2 < 0 (TrigRF) (3) is even in c, so a simplex block acts like one
// with cosine +1/(d-1): at d = 2 (antithetic pairs) it is worse than iid, and above d = 2 it is worse than
// orthogonal at small |z| (scripts/coupled_reference.py prints the table).
// Numerics: (4)-(5) have no cancellation as S -> 0 (T1, T2 = O(S^2); expm1, cosh - 1), so Var/K^2 ~ 1e-12 keeps
// its relative accuracy. For large S, T2 in (5) is a tiny alternating sum of O(1) terms; there (3) is evaluated
// directly instead, through e^-y M(-d/2, d/2, y) = E_{k~Poisson(y)}[(-1)^k Pi_k] (for k > d/2 these terms have one
// sign), choosing per point the form whose terms are smaller; (5) is scaled by e^-S, so log-variances of several
// hundred are fine. E_v is a tanh-sinh integral over v = cos(psi), psi in [0, pi/2], split at psi = 10/sqrt(d) where
// the weight cos^(d-1) psi concentrates, to 1e-13 of the integral of |integrand|.
// Accuracy: relative 1e-10 on Cov or better, and on Var/K^2, against the 30-50 digit mpmath reference
// (tests/coupled_variance_test.cpp prints the worst case).
#pragma once
#include <armadillo>

#include "core/logmath.hpp"
#include "estimators/estimator.hpp"
#include "estimators/isotropic.hpp"
#include "sampling/omega.hpp"

namespace kestrel {

// Cov(Re g(w1), Re g(w2)) / K^2 of two features of the form whose directions have cosine c in [-1, 1] (a Haar-
// rotated pair; norms iid chi(d)), at S = |x + s y|^2: eq. (4)-(5), as a signed log. InvalidArgument for d < 2, S < 0
// or non-finite, c outside [-1, 1], or a form with s != +-1 or kappa2 not finite.
SignedLog coupled_cov_over_k2(const IsotropicForm& f, arma::uword d, double S, double c);

// The cosine of two directions in one block: 0 (orthogonal), -1/(d-1) (simplex; d >= 2). InvalidArgument for the
// samplers without such a structure (iid has no pairs; structured and halton have no exact coupled variance).
double block_cosine(Sampler sampler, arma::uword d);

// log(Var/K^2) of the M-feature estimate, eq. (1), from the single-feature log(V1) of the same pair: log_var1 - log M
// for the iid sampler, and when every block has one column (d = 1 or M = 1). NumericalError if the result is not
// positive (it cannot be, up to rounding, for a valid form).
double coupled_log_var_over_k2(const IsotropicForm& f, arma::uword d, double S, double log_var1, arma::uword M,
                               Sampler sampler);

// log Var of the M-feature estimate of K^(alpha)(X, Y) drawn with the sampler, all pairs (like log_variance, which
// it equals for iid). InvalidArgument for a coupled sampler and a family without an isotropic form, and for the
// structured and halton samplers.
arma::mat coupled_log_variance(const Estimator& e, const Kernel& k, const arma::mat& X, const arma::mat& Y,
                               arma::uword M, Sampler sampler);

}  // namespace kestrel
