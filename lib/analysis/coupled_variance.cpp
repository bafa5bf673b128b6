// Exact variance with orthogonal and simplex projection blocks, eq. (1)-(5) of coupled_variance.hpp.
#include "analysis/coupled_variance.hpp"

#include <algorithm>
#include <cmath>

#include <boost/math/quadrature/tanh_sinh.hpp>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "estimators/registry.hpp"

namespace kestrel {

namespace {

// Poisson(lambda) expectations, h = d/2: T1 = E[1 - Pi_k] >= 0 and T2 = E[(-1)^k (1 - Pi_k)] (eq. 4-5), and
// Q = E[(-1)^k Pi_k] = e^-lambda M(-d/2, d/2, lambda) (the direct form: T2 = e^{-2 lambda} - Q), each alternating sum
// with the sum of its terms' absolute values (its rounding-error scale). 1 - Pi_k has its own recurrence
// (1 - Pi_{k+1} = 1 - Pi_k + Pi_k 2k / (h + k)), so that T1, T2 = O(lambda^2) keep their relative accuracy as
// lambda -> 0. Terms beyond lambda + 12 sqrt(lambda) + 40 carry less than e^-70 of the mass.
struct PoissonSums {
  double t1 = 0, t2 = 0, t2_abs = 0, q = 0, q_abs = 0;
};

PoissonSums poisson_sums(double h, double lambda) {
  PoissonSums r;
  if (lambda <= 0) {  // k = 0 surely
    r.q = r.q_abs = 1;
    return r;
  }
  const double k_hi = std::ceil(lambda + 12 * std::sqrt(lambda) + 40), log_lambda = std::log(lambda);
  // Poisson probabilities by p_{k+1} = p_k lambda / (k+1) (relative error ~ k eps) while e^-lambda is a normal
  // number, else from lgamma term by term.
  const bool recurrence = lambda < 700;
  double pi = 1, one_minus_pi = 0, p = std::exp(-lambda);
  for (double k = 0; k <= k_hi; ++k) {
    if (!recurrence) {
      const double lp = -lambda + k * log_lambda - std::lgamma(k + 1);
      p = lp > kExpUnderflow ? std::exp(lp) : 0.0;
    }
    const double sign = std::fmod(k, 2.0) == 0 ? 1.0 : -1.0;
    r.t1 += p * one_minus_pi;
    r.t2 += sign * p * one_minus_pi;
    r.t2_abs += p * std::abs(one_minus_pi);
    r.q += sign * p * pi;
    r.q_abs += p * std::abs(pi);
    one_minus_pi += pi * 2 * k / (h + k);
    pi *= (h - k) / (h + k);
    if (recurrence) p *= lambda / (k + 1);
  }
  return r;
}

// e^-S (cosh x - 1) for |x| <= S, without overflow.
double scaled_cosh_minus_one(double x, double S) {
  const double a = std::abs(x);
  if (a < 30) {
    const double sh = std::sinh(0.5 * a);
    return 2 * sh * sh * std::exp(-S);
  }
  const double t = -std::expm1(-a);
  return 0.5 * std::exp(a - S) * t * t;
}

// e^-x M(-n, n, x) for an integer n >= 1 (d = 2n even), where the Poisson sum Q = E[(-1)^k Pi_k] is a finite
// alternating sum that cancels: M(-n, n, x) = L_n^(n-1)(x) n! (n-1)! / (2n-1)! with the Laguerre recurrence
// (m+1) L_{m+1} = (2m + 1 + a - x) L_m - (m + a) L_{m-1}, a = n - 1, run forward (stable), rescaled to stay finite.
double laguerre_q(double n, double x) {
  const double a = n - 1;
  double prev = 1, cur = 1 + a - x, log_scale = 0;  // L_0, L_1
  for (double m = 1; m < n; ++m) {
    const double next = ((2 * m + 1 + a - x) * cur - (m + a) * prev) / (m + 1);
    prev = cur;
    cur = next;
    if (std::abs(cur) > 1e150) {
      cur *= 1e-150, prev *= 1e-150;
      log_scale += 150 * M_LN10;
    }
  }
  if (cur == 0) return 0;
  const double log_norm = std::lgamma(n + 1) + std::lgamma(n) - std::lgamma(2 * n);
  return std::copysign(std::exp(std::log(std::abs(cur)) + log_scale + log_norm - x), cur);
}

// e^-S (H(t1) H(t2) - 1) averaged over the directions for one v, kappa2 < 0: eq. (5) (cancellation-free as S -> 0) or
// the direct form e^-S (e^S (Q(y+) + Q(y-)) / 2 - 1) of eq. (3) (for large S, where (5)'s T2 is a tiny difference of
// O(1) terms), whichever has the smaller rounding scale. Q is the Poisson sum for odd d (whose terms beyond k = d/2
// have one sign) and the Laguerre recurrence for even d (relative error ~ d eps).
double oscillating_term(arma::uword d, double S, double c, double v) {
  const double h = 0.5 * static_cast<double>(d), x = S * c * v, yp = 0.5 * S * (1 + c * v), ym = 0.5 * S * (1 - c * v);
  const PoissonSums p = poisson_sums(h, yp);
  const PoissonSums m = c == 0 ? p : poisson_sums(h, ym);
  const double ch = scaled_cosh_minus_one(x, S), e = std::exp(-S);
  const double a = ch - 0.5 * (p.t2 + m.t2), a_scale = ch + 0.5 * (p.t2_abs + m.t2_abs);
  double q = 0.5 * (p.q + m.q), q_scale = 0.5 * (p.q_abs + m.q_abs);
  if (d % 2 == 0) {
    const double qp = laguerre_q(h, yp), qm = c == 0 ? qp : laguerre_q(h, ym);
    q = 0.5 * (qp + qm);
    q_scale = 0.5 * h * (std::abs(qp) + std::abs(qm));
  }
  return a_scale <= q_scale + e ? a : q - e;
}

// E_v[f(v)], v = cos(psi) with density cos^(d-1)(psi) / W_d on [0, pi/2]; split where the weight concentrates.
// tanh-sinh stops when its error estimate is below 1e-13 of the integral of |integrand| (L1): a relative accuracy
// also where the integrand changes sign.
template <typename F>
double expect_v(arma::uword d, F&& f) {
  const double dd = static_cast<double>(d);
  const double log_wd = std::lgamma(0.5 * dd) - std::lgamma(0.5 * (dd + 1)) + 0.5 * std::log(M_PI) - M_LN2;
  auto integrand = [&](double psi) {
    const double v = std::cos(psi);
    const double w = v > 0 ? std::exp((dd - 1) * std::log(v) - log_wd) : 0.0;
    return w == 0 ? 0.0 : w * f(v);
  };
  static boost::math::quadrature::tanh_sinh<double> ts;  // abscissas computed once; integrate() is thread-safe
  constexpr double kTol = 1e-13;
  const double split = std::min(M_PI / 2, 10 / std::sqrt(dd));
  double r = ts.integrate(integrand, 0.0, split, kTol);
  if (split < M_PI / 2) r += ts.integrate(integrand, split, M_PI / 2, kTol);
  return r;
}

bool is_coupled(Sampler s) { return s == Sampler::Orthogonal || s == Sampler::Simplex; }

void validate_form(const IsotropicForm& f) {
  require(f.s == 1 || f.s == -1, "isotropic form: s must be +1 or -1, got {}", f.s);
  require(std::isfinite(f.kappa2), "isotropic form: kappa2 must be finite, got {}", f.kappa2);
}

}  // namespace

SignedLog coupled_cov_over_k2(const IsotropicForm& f, arma::uword d, double S, double c) {
  validate_form(f);
  require(d >= 2, "coupled directions need dimension d >= 2, got {}", d);
  require(std::isfinite(S) && S >= 0, "S = |x + s y|^2 must be finite and >= 0, got {}", S);
  require(c >= -1 && c <= 1, "the cosine of two directions must be in [-1, 1], got {}", c);
  const double h = 0.5 * static_cast<double>(d);
  S *= std::abs(f.kappa2);
  if (S == 0) return {};
  if (f.kappa2 > 0) {  // eq. (4), scaled by e^-L, L = S max(c, 0), so that e^x <= e^L stays finite
    if (c == 0) return SignedLog::from_value(-poisson_sums(h, 0.5 * S).t1);
    const double L = S * std::max(c, 0.0);
    const double I = expect_v(d, [&](double v) {
      const double x = S * c * v;
      return std::exp(-L) * std::expm1(x) - std::exp(x - L) * poisson_sums(h, 0.5 * S * (1 + c * v)).t1;
    });
    const SignedLog r = SignedLog::from_value(I);
    return SignedLog::from_log(r.log_abs + L, r.sign);
  }
  // eq. (5), scaled by e^-S
  const double I =
      c == 0 ? oscillating_term(d, S, 0.0, 1.0) : expect_v(d, [&](double v) { return oscillating_term(d, S, c, v); });
  const SignedLog r = SignedLog::from_value(I);
  return SignedLog::from_log(r.log_abs + S, r.sign);
}

double block_cosine(Sampler sampler, arma::uword d) {
  require(is_coupled(sampler), "the {} sampler has no fixed cosine between the directions of a block",
          to_string(sampler));
  require(d >= 2, "a block of directions needs dimension d >= 2, got {}", d);
  return sampler == Sampler::Orthogonal ? 0.0 : -1.0 / static_cast<double>(d - 1);
}

double coupled_log_var_over_k2(const IsotropicForm& f, arma::uword d, double S, double log_var1, arma::uword M,
                               Sampler sampler) {
  require(M > 0, "number of features M must be > 0, got 0");
  require(d > 0, "dimension d must be > 0, got 0");
  require(!std::isnan(log_var1) && log_var1 < kInf, "log(Var/K^2) of one feature must be finite or -inf, got {}",
          log_var1);
  require(sampler == Sampler::Iid || is_coupled(sampler),
          "no exact variance with the {} sampler (only iid, orthogonal and simplex)", to_string(sampler));
  const double log_m = std::log(static_cast<double>(M));
  const double full = static_cast<double>(M / d), rest = static_cast<double>(M % d), dd = static_cast<double>(d);
  const double pairs = full * dd * (dd - 1) + rest * (rest - 1);  // ordered pairs within blocks
  if (sampler == Sampler::Iid || pairs == 0) return log_var1 - log_m;
  const SignedLog cov = coupled_cov_over_k2(f, d, S, block_cosine(sampler, d));
  const SignedLog total =
      SignedLog::from_log(log_m + log_var1) + SignedLog::from_log(std::log(pairs) + cov.log_abs, cov.sign);
  if (total.sign == 0) return -kInf;
  if (total.sign < 0)
    throw NumericalError(fmt::format("coupled variance came out negative (d = {}, S = {}, M = {}, sampler {})", d, S, M,
                                     to_string(sampler)));
  return total.log_abs - 2 * log_m;
}

arma::mat coupled_log_variance(const Estimator& e, const Kernel& k, const arma::mat& X, const arma::mat& Y,
                               arma::uword M, Sampler sampler) {
  validate_pair(X, Y, e.dim());
  require(M > 0, "number of features M must be > 0, got 0");
  if (sampler == Sampler::Iid) return log_variance(e, k, X, Y, M);
  require(is_coupled(sampler), "no exact variance with the {} sampler (only iid, orthogonal and simplex)",
          to_string(sampler));
  const std::optional<IsotropicForm> form = isotropic_form(e);
  require(form.has_value(),
          "estimator '{}' has no isotropic form: its variance with {} projections is not known exactly (measure it "
          "by Monte Carlo)",
          e.info().name, to_string(sampler));
  const arma::mat lv1 = e.log_var_over_k2(X, Y);
  const arma::mat S = pairwise_sq_norm_sum(X, Y, form->s);
  arma::mat out = 2.0 * log_kernel(k, X, Y);
  for_each_block(out.n_cols, [&](std::size_t j) {  // each column its own: identical for any thread count
    for (arma::uword i = 0; i < out.n_rows; ++i)
      out(i, j) += coupled_log_var_over_k2(*form, e.dim(), S(i, j), lv1(i, j), M, sampler);
  });
  return out;
}

}  // namespace kestrel
