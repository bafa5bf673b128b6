// Closed-form shifted log-variance objectives (DERF eq. 8) of the dense-exponential family, from O(L d^2)
// statistics: any valid DERF, ADERF (eq. 10), SDERF (eq. 11) and SADERF (eq. 12). Lower is better. The exact
// all-pairs objective for any estimator is analysis/objective.hpp.
#pragma once
#include "estimators/derf/derf.hpp"

namespace kestrel {

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
