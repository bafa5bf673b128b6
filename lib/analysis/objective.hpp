// The shifted log-variance objective of DERF eq. (8),
//   F(theta; X, Y) = mean over all pairs of log(Var[f1(w,x_i) f2(w,y_j)] + K(x_i,y_j)^2)   (softmax K),
// computed exactly over all L_x x L_y pairs for any estimator (streamed in fixed blocks like
// pairwise.hpp), and in closed form from O(L d^2) statistics for the DERF-paper GERF (= kestrel's
// oprf family: real A, s = +1; section 3.1), any valid DERF, ADERF (eq. 10), SDERF (eq. 11) and
// SADERF (eq. 12). Lower is better; the floor is 2 mean x^T y (every variance zero).
#pragma once
#include "estimators/derf/derf.hpp"
#include "estimators/estimator.hpp"
#include "estimators/gerf/gerf.hpp"

namespace kestrel {

// Exact eq. (8): mean of log(Var/K^2 + 1) + 2 x^T y over all pairs, O(L_x L_y) evaluations of the
// estimator's variance in block x block tiles (peak memory O(block^2)), summed in block order
// (identical for any thread count). Throws NumericalError on a NaN or +inf log-variance.
double shifted_log_variance_objective(const Estimator& e, const arma::mat& X, const arma::mat& Y,
                                      arma::uword block = 256);

// DERF section 3.1 (display after eq. 8) for real A, s = +1 (what oprf fits):
//   d log((1-4A)/sqrt(1-8A)) + (2-8A)/(1-8A) mean|x+y|^2 - mean|x|^2 - mean|y|^2.
double gerf_shifted_objective(const GerfParams& p, const HomogeneityStats& st);

// Any valid DERF (Thm 4.1), from the statistics in O(d^3), by averaging the form of derf_second_moment:
//   c0 + tr(B1^T T^T T B1 M1) + tr(B2^T T^T T B2 M2) + 2 mu4^T B1^T T^T T B2 mu5 + 2 mu4^T mu5.
double derf_objective(const DerfParams& p, const DerfStats& st);

// Thm 4.2 eq. (10) at the fitted A, Sigma, mu3. With a ridge this is the optimum of the regularised
// problem (derf.hpp); with ridge 0 it is the value of (8) at the fitted parameters.
double aderf_objective(const AderfFit& f);

// Thm 4.3 eq. (11): sum_l (log(1-4A_ll) - 1/2 log(1-8A_ll) + (1 + (1-8A_ll)^-1) Lambda3_ll)
//   - mean|x|^2 - mean|y|^2.
double sderf_objective(const SderfFit& f, const DerfStats& st);

// Eq. (12): the GERF objective on (Psi x, Psi^-1 y) (with the ridge on the diagonal statistics, so this
// is the regularised optimum; equal to (8) at the fitted parameters when ridge = 0).
double saderf_objective(const SaderfFit& f);

}  // namespace kestrel
