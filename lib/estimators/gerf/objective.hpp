// Closed-form shifted log-variance objective (DERF eq. 8) of the DERF-paper GERF (real A, s = +1: what the oprf
// family fits, DERF section 3.1). The exact all-pairs objective for any estimator is analysis/objective.hpp.
#pragma once
#include "estimators/gerf/gerf.hpp"

namespace kestrel {

// DERF section 3.1 (display after eq. 8) for real A, s = +1:
//   d log((1-4A)/sqrt(1-8A)) + (2-8A)/(1-8A) mean|x+y|^2 - mean|x|^2 - mean|y|^2.
double gerf_shifted_objective(const GerfParams& p, const HomogeneityStats& st);

}  // namespace kestrel
