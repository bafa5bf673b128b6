// Closed-form GERF objective (DERF section 3.1); see gerf/objective.hpp.
#include "estimators/gerf/objective.hpp"

#include <cmath>

#include "core/error.hpp"

namespace kestrel {

double gerf_shifted_objective(const GerfParams& p, const HomogeneityStats& st) {
  validate(p);
  require(p.s == 1 && p.A.imag() == 0.0,
          "the DERF-paper GERF objective needs real A and s = +1, got A = {}+{}i, s = {}", p.A.real(), p.A.imag(), p.s);
  const double a = p.A.real(), dd = static_cast<double>(st.d);
  return dd * (std::log1p(-4 * a) - 0.5 * std::log1p(-8 * a)) + (2 - 8 * a) / (1 - 8 * a) * st.mean_sum_sq(1) -
         st.mean_x2 - st.mean_y2;
}

}  // namespace kestrel
