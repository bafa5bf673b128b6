// Closed-form DERF-family objectives (DERF eq. 8, 10-12); see derf/objective.hpp.
#include "estimators/derf/objective.hpp"

#include <cmath>

#include "core/error.hpp"
#include "estimators/gerf/objective.hpp"

namespace kestrel {

double derf_objective(const DerfParams& p, const DerfStats& st) {
  validate(p);
  require(st.d == p.dim(), "statistics have dimension {}, DERF has {}", st.d, p.dim());
  const DerfSecondMoment f = derf_second_moment(p);
  return f.c0 + arma::trace(f.TB1.t() * f.TB1 * st.M1) + arma::trace(f.TB2.t() * f.TB2 * st.M2) +
         2.0 * arma::dot(f.TB1 * st.mu4, f.TB2 * st.mu5) + 2.0 * arma::dot(st.mu4, st.mu5);
}

double aderf_objective(const AderfFit& f) {
  const double d = static_cast<double>(f.sigma.n_elem), A = f.A;
  return d * (std::log1p(-4 * A) - 0.5 * std::log1p(-8 * A) + 2.0 / (1 - 8 * A) * (arma::mean(f.sigma) + f.mu3) +
              2 * f.mu3);
}

double sderf_objective(const SderfFit& f, const DerfStats& st) {
  const arma::vec& a = f.a;
  return arma::accu(arma::log1p(-4 * a) - 0.5 * arma::log1p(-8 * a) + (1 + 1 / (1 - 8 * a)) % f.lambda3) -
         arma::trace(st.M1) - arma::trace(st.M2);
}

double saderf_objective(const SaderfFit& f) { return gerf_shifted_objective(f.gerf, f.transformed); }

}  // namespace kestrel
