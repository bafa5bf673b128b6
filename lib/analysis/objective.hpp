// The shifted log-variance objective of DERF eq. (8),
//   F(theta; X, Y) = mean over all pairs of log(Var[f1(w,x_i) f2(w,y_j)] + K(x_i,y_j)^2)   (softmax K),
// computed exactly over all L_x x L_y pairs for any estimator (streamed in fixed blocks like
// pairwise.hpp). Lower is better; the floor is 2 mean x^T y (every variance zero). The closed forms live with
// their families: estimators/gerf/objective.hpp, estimators/derf/objective.hpp.
#pragma once
#include "estimators/estimator.hpp"

namespace kestrel {

// Exact eq. (8): mean of log(Var/K^2 + 1) + 2 x^T y over all pairs, O(L_x L_y) evaluations of the
// estimator's variance in block x block tiles (peak memory O(block^2)), summed in block order
// (identical for any thread count). Throws NumericalError on a NaN or +inf log-variance.
double shifted_log_variance_objective(const Estimator& e, const arma::mat& X, const arma::mat& Y,
                                      arma::uword block = 256);

}  // namespace kestrel
