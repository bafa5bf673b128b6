// Parameter fitting for discretely-induced RFs: eq. 12 / 14 statistics in O(L d), PoisRF's closed-form lambda*
// (CRT 3.2.1), GeomRF's p by Brent's method with 100 iterations (CRT 3.2.2, appendix 9.10.1) and the PoisRF+ / GeomRF+
// shift c (CRT 3.2.3, appendix 9.10.2).
#include <cmath>
#include <limits>

#include <boost/math/tools/minima.hpp>

#include "core/error.hpp"
#include "core/logmath.hpp"
#include "estimators/discrete/discrete.hpp"

namespace kestrel {

DiscreteStats discrete_stats(const arma::mat& X, const arma::mat& Y) {
  validate_sets(X, Y);
  DiscreteStats st;
  st.d = X.n_rows;
  // Eq. 12 and 14 with separate set sizes: a mean over Lx * Ly pairs of a product factorises per coordinate.
  st.mean_sum_sq_prod = arma::dot(arma::mean(arma::square(X), 1), arma::mean(arma::square(Y), 1));
  st.mean_abs_prod = arma::mean(arma::abs(X), 1) % arma::mean(arma::abs(Y), 1);
  st.mean_xy = arma::dot(arma::mean(X, 1), arma::mean(Y, 1));
  return st;
}

double poisson_objective(double lambda, const DiscreteStats& st) {
  validate(DiscreteParams{DiscreteKind::Poisson, lambda, 0.5});
  return lambda * static_cast<double>(st.d) + st.mean_sum_sq_prod / lambda - 2.0 * st.mean_xy;
}

double geometric_objective(double p, const DiscreteStats& st) {
  validate(DiscreteParams{DiscreteKind::Geometric, 1.0, p});
  require(st.mean_abs_prod.n_elem == st.d, "statistics have {} averages a_l for dimension {}", st.mean_abs_prod.n_elem,
          st.d);
  const double scale = 2.0 / std::sqrt(1.0 - p);
  double f = -static_cast<double>(st.d) * std::log(p) - 2.0 * st.mean_xy;
  for (double a : st.mean_abs_prod) f += log_bessel_i0(scale * a);
  return f;
}

namespace {

void require_nondegenerate(const DiscreteStats& st, const char* what) {
  require(st.d > 0, "dimension d must be > 0, got 0");
  require(std::isfinite(st.mean_sum_sq_prod) && st.mean_sum_sq_prod >= 0,
          "mean of sum_l x_l^2 y_l^2 must be finite and >= 0, got {}", st.mean_sum_sq_prod);
  require(st.mean_sum_sq_prod > 0,
          "{}: every coordinate is zero in X or in Y (mean sum_l x_l^2 y_l^2 = 0); the variance decreases towards the "
          "degenerate distribution w = 0 and no valid parameter minimises it",
          what);
}

}  // namespace

double poisson_lambda_star(const DiscreteStats& st) {
  require_nondegenerate(st, "PoisRF lambda*");
  // d/dlambda (lambda d + S/lambda) = d - S/lambda^2 = 0.
  return std::sqrt(st.mean_sum_sq_prod / static_cast<double>(st.d));
}

double fit_geometric_p(const DiscreteStats& st, const GeometricFitOptions& opt) {
  require_nondegenerate(st, "GeomRF p");
  require(opt.max_iter > 0, "Brent iterations must be > 0, got {}", opt.max_iter);
  // p = 1 / (1 + e^{-u}); the objective sees the rounded p, so the fitted value is exactly what it minimised.
  auto p_of = [](double u) { return 1.0 / (1.0 + std::exp(-u)); };
  auto f = [&](double u) {
    const double p = p_of(u);
    if (!(p > 0 && p < 1)) return std::numeric_limits<double>::max();
    const double v = geometric_objective(p, st);
    return std::isfinite(v) ? v : std::numeric_limits<double>::max();
  };
  std::uintmax_t iters = static_cast<std::uintmax_t>(opt.max_iter);
  const auto r = boost::math::tools::brent_find_minima(f, -30.0, 30.0, std::numeric_limits<double>::digits, iters);
  const double p = p_of(r.first);
  if (!std::isfinite(r.second) || !(p > 0 && p < 1))
    throw NumericalError(fmt::format("GeomRF fit found no finite objective value (p = {})", p));
  return p;
}

ShiftParams fit_shift(const arma::mat& X, const arma::mat& Y, double epsilon) {
  validate_sets(X, Y);
  require(std::isfinite(epsilon) && epsilon > 0, "shift epsilon must be > 0, got {}", epsilon);
  ShiftParams s;
  s.epsilon = epsilon;
  s.c = arma::min(arma::min(X, 1), arma::min(Y, 1)) - epsilon;
  // Rounding of m - epsilon may leave the minimum m less than epsilon above c; step c down until it is not, so that
  // no point of the fitting sets is clamped (clamping would bias it).
  const arma::vec m = arma::min(arma::min(X, 1), arma::min(Y, 1));
  for (arma::uword l = 0; l < s.c.n_elem; ++l)
    while (m(l) - s.c(l) < epsilon) s.c(l) = std::nextafter(s.c(l), -kInf);
  return s;
}

arma::mat shift_points(const ShiftParams& s, const arma::mat& X) {
  require(X.n_rows == s.c.n_elem, "points have dimension {}, shift expects {}", X.n_rows, s.c.n_elem);
  arma::mat Xh = X.each_col() - s.c;
  Xh.clamp(s.epsilon, arma::datum::inf);
  return Xh;
}

std::unique_ptr<Estimator> make_pois(const arma::mat& X, const arma::mat& Y) {
  const double lambda = poisson_lambda_star(discrete_stats(X, Y));
  return std::make_unique<DiscreteEstimator>("pois", X.n_rows, DiscreteParams{DiscreteKind::Poisson, lambda, 0.5});
}

std::unique_ptr<Estimator> make_geom(const arma::mat& X, const arma::mat& Y) {
  const double p = fit_geometric_p(discrete_stats(X, Y));
  return std::make_unique<DiscreteEstimator>("geom", X.n_rows, DiscreteParams{DiscreteKind::Geometric, 1.0, p});
}

std::unique_ptr<Estimator> make_discrete_plus(DiscreteKind kind, const arma::mat& X, const arma::mat& Y,
                                              ShiftParams s) {
  require(s.c.n_elem == X.n_rows, "shift has dimension {}, points {}", s.c.n_elem, X.n_rows);
  const DiscreteStats st = discrete_stats(shift_points(s, X), shift_points(s, Y));
  if (kind == DiscreteKind::Poisson)
    return std::make_unique<DiscreteEstimator>(
        "pois+", X.n_rows, DiscreteParams{DiscreteKind::Poisson, poisson_lambda_star(st), 0.5}, std::move(s));
  return std::make_unique<DiscreteEstimator>(
      "geom+", X.n_rows, DiscreteParams{DiscreteKind::Geometric, 1.0, fit_geometric_p(st)}, std::move(s));
}

std::unique_ptr<Estimator> make_pois_plus(const arma::mat& X, const arma::mat& Y) {
  return make_discrete_plus(DiscreteKind::Poisson, X, Y, fit_shift(X, Y));
}

std::unique_ptr<Estimator> make_pois_plus_from_reference(const arma::mat& X, const arma::mat& Y) {
  return make_discrete_plus(DiscreteKind::Poisson, X, Y, fit_shift(Y, Y));
}

std::unique_ptr<Estimator> make_geom_plus_from_reference(const arma::mat& X, const arma::mat& Y) {
  return make_discrete_plus(DiscreteKind::Geometric, X, Y, fit_shift(Y, Y));
}

std::unique_ptr<Estimator> make_geom_plus(const arma::mat& X, const arma::mat& Y) {
  return make_discrete_plus(DiscreteKind::Geometric, X, Y, fit_shift(X, Y));
}

}  // namespace kestrel
