// Parameter fitting for GERF-family estimators: OPRF's closed form (CRT Thm 3.3, eq. 7-8) and the
// numerical minimisation of the averaged variance over A in C for s = +-1 (CRT appendix 9.10.1).
#include <algorithm>
#include <cmath>
#include <limits>

#include <gsl/gsl_multimin.h>

#include "core/error.hpp"
#include "core/logmath.hpp"
#include "estimators/gerf/gerf.hpp"

namespace kestrel {

using cplx = std::complex<double>;

double gerf_objective(const GerfParams& p, const HomogeneityStats& st) {
  // log(E[Re(f1 f2)^2] / K^2) = log(1 + Var/K^2) from the accurate log-variance: where Var/K^2 ~ 1e-12 (sphere regime,
  // small sigma) the objective is then resolved to full relative precision, not to 1e-16 absolute.
  return log_add_exp(0.0, gerf_log_var_over_k2(p, st.d, st.mean_sum_sq(p.s)));
}

double oprf_rho_star(double S, arma::uword d) {
  require(S >= 0 && std::isfinite(S), "mean |x+y|^2 must be finite and >= 0, got {}", S);
  const double dd = static_cast<double>(d);
  // Positive root of 2S rho^2 + (2S + d) rho - d = 0 (CRT eq. 22), in the cancellation-free form
  // 2d / (2S + d + sqrt(disc)); equals 1 at S = 0 where the printed form (7) is 0/0.
  const double disc = (2 * S + dd) * (2 * S + dd) + 8 * dd * S;
  return 2 * dd / (2 * S + dd + std::sqrt(disc));
}

GerfParams fit_oprf(const HomogeneityStats& st) {
  const double rho = oprf_rho_star(st.mean_sum_sq(1), st.d);
  return {cplx((1.0 - 1.0 / rho) / 8.0, 0.0), 1};
}

namespace {

struct Problem {
  const HomogeneityStats* st;
  int s;
};

// A = (1 - e^u)/8 + i v keeps Re(1 - 8A) = e^u > 0 without constraints.
cplx a_of(double u, double v) { return {(1.0 - std::exp(u)) / 8.0, v}; }

double objective_uv(const gsl_vector* x, void* params) {
  const auto* pr = static_cast<const Problem*>(params);
  const double u = gsl_vector_get(x, 0), v = gsl_vector_get(x, 1);
  if (!std::isfinite(u) || !std::isfinite(v) || std::abs(u) > 50) return std::numeric_limits<double>::max();
  const double f = gerf_objective({a_of(u, v), pr->s}, *pr->st);
  return std::isfinite(f) ? f : std::numeric_limits<double>::max();
}

std::pair<double, GerfParams> minimise_from(const Problem& pr, double u0, double v0, const GerfFitOptions& opt) {
  gsl_multimin_function fn{&objective_uv, 2, const_cast<Problem*>(&pr)};
  gsl_vector* x = gsl_vector_alloc(2);
  gsl_vector* step = gsl_vector_alloc(2);
  gsl_vector_set(x, 0, u0);
  gsl_vector_set(x, 1, v0);
  gsl_vector_set_all(step, 0.25);
  gsl_multimin_fminimizer* m = gsl_multimin_fminimizer_alloc(gsl_multimin_fminimizer_nmsimplex2, 2);
  gsl_multimin_fminimizer_set(m, &fn, x, step);
  for (int it = 0; it < opt.max_iter; ++it) {
    if (gsl_multimin_fminimizer_iterate(m) != GSL_SUCCESS) break;
    if (gsl_multimin_test_size(gsl_multimin_fminimizer_size(m), opt.tolerance) == GSL_SUCCESS) break;
  }
  const double u = gsl_vector_get(m->x, 0), v = gsl_vector_get(m->x, 1);
  std::pair<double, GerfParams> best{m->fval, GerfParams{a_of(u, std::abs(v)), pr.s}};
  gsl_multimin_fminimizer_free(m);
  gsl_vector_free(x);
  gsl_vector_free(step);
  return best;
}

}  // namespace

GerfParams fit_gerf(const HomogeneityStats& st, const GerfFitOptions& opt) {
  require(st.d > 0, "dimension d must be > 0, got 0");
  require(std::isfinite(st.mean_x2) && std::isfinite(st.mean_y2) && std::isfinite(st.mean_xy),
          "homogeneity statistics must be finite");
  // The variance is symmetric in Im A (conjugate features), so starts have v >= 0. The grid covers
  // the trigonometric (A = 0, s = -1), positive (A = 0, s = +1) and OPRF points among others.
  const double oprf_u = std::log(1.0 / oprf_rho_star(st.mean_sum_sq(1), st.d));
  double best_f = kInf;
  GerfParams best{cplx(0, 0), 1};
  for (int s : {-1, 1}) {
    const Problem pr{&st, s};
    for (double u0 : {-3.0, -1.0, 0.0, 1.0, 3.0, oprf_u}) {
      for (double v0 : {0.0, 0.05, 0.3, 1.0}) {
        auto [f, p] = minimise_from(pr, u0, v0, opt);
        if (f < best_f) best_f = f, best = p;
      }
    }
  }
  if (!std::isfinite(best_f)) throw NumericalError("GERF fit found no finite objective value");
  // Nelder-Mead stops ~1e-9 off the real axis when the optimum is real; a real A (with s = +1) gives
  // positive features with one real column per feature, so snap when that is no worse. The tolerance is relative:
  // the objective is ~1e-12 in the sphere regime at sigma = 0.001, where an absolute 1e-12 would accept any A.
  const GerfParams real{cplx(best.A.real(), 0.0), best.s};
  if (gerf_objective(real, st) <= best_f + 1e-12 * std::abs(best_f)) best = real;
  return best;
}

std::unique_ptr<Estimator> make_trig(const arma::mat& X, const arma::mat&) {
  return std::make_unique<GerfEstimator>("trig", X.n_rows, GerfParams{cplx(0, 0), -1});
}
std::unique_ptr<Estimator> make_pos(const arma::mat& X, const arma::mat&) {
  return std::make_unique<GerfEstimator>("pos", X.n_rows, GerfParams{cplx(0, 0), 1});
}
std::unique_ptr<Estimator> make_oprf(const arma::mat& X, const arma::mat& Y) {
  return std::make_unique<GerfEstimator>("oprf", X.n_rows, fit_oprf(homogeneity_stats(X, Y)));
}
std::unique_ptr<Estimator> make_gerf(const arma::mat& X, const arma::mat& Y) {
  return std::make_unique<GerfEstimator>("gerf", X.n_rows, fit_gerf(homogeneity_stats(X, Y)));
}

}  // namespace kestrel
