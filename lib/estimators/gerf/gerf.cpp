// GERF exact variance and feature maps (CRT Thm 3.1-3.2, eq. 4-6); see gerf.hpp.
#include "estimators/gerf/gerf.hpp"

#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "core/logmath.hpp"
#include "core/parallel.hpp"
#include "core/vecmath.hpp"
#include "estimators/state.hpp"

namespace kestrel {

using cplx = std::complex<double>;

void validate(const GerfParams& p) {
  require(p.s == 1 || p.s == -1, "GERF s must be +1 or -1, got {}", p.s);
  require(std::isfinite(p.A.real()) && std::isfinite(p.A.imag()), "GERF A must be finite, got {}+{}i", p.A.real(),
          p.A.imag());
  require(1.0 - 8.0 * p.A.real() > 0, "GERF needs Re(1 - 8A) > 0 for a finite variance, got A = {}+{}i", p.A.real(),
          p.A.imag());
}

namespace {

// log(1 + z) for complex z, accurate for small |z|: log|1 + z| = log1p(2 Re z + |z|^2) / 2.
cplx log1p(cplx z) { return {0.5 * std::log1p(2.0 * z.real() + std::norm(z)), std::atan2(z.imag(), 1.0 + z.real())}; }

}  // namespace

GerfExponents gerf_exponents(const GerfParams& p, arma::uword d, double S) {
  const double half_d = 0.5 * static_cast<double>(d), s = p.s;
  const cplx A = p.A, one_4a = 1.0 - 4.0 * A, one_8a = 1.0 - 8.0 * A;
  const double a = A.real(), b = A.imag(), one_8re = 1.0 - 8.0 * a;
  // d Log(1-4A) - (d/2) Log(1-8A) = (d/2) [Log1p(16 A^2 / (1-8A)) + 2 pi i k], as (1-4A)^2 = (1-8A) + 16 A^2; the
  // integer k keeps the principal branches of the printed form (Re(1-4A) > 1/2, so |k| <= 1).
  const cplx l1 = log1p(16.0 * A * A / one_8a);
  const double k = std::nearbyint((2.0 * std::arg(one_4a) - std::arg(one_8a) - l1.imag()) / (2.0 * M_PI));
  // d log|1-4A| - (d/2) log(1-8 Re A) = (d/2) log1p(16 |A|^2 / (1-8 Re A)), as |1-4A|^2 = (1-8 Re A) + 16 |A|^2.
  const double l3 = std::log1p(16.0 * std::norm(A) / one_8re);
  const double abs_4a = std::abs(one_4a);
  // |1-4A| - Re(1-4A) = 16 (Im A)^2 / (|1-4A| + Re(1-4A)), without the cancellation.
  const double gap = 16.0 * b * b / (abs_4a + one_4a.real());
  // rho3's coefficient of S, (|1-4A| + s Re(1-4A)) / (1-8 Re A) - s, and that of rho1, s / (1-8A).
  const double c3 = s > 0 ? (abs_4a + 4.0 * a) / one_8re : gap / one_8re + 1.0;
  const cplx c1 = s / one_8a;
  // Sum of the two real coefficients: for s = -1, 1 - Re(1/(1-8A)) = Re(-8A/(1-8A)) (the two leading 1s cancel).
  const double c_sum = s > 0 ? c1.real() + c3 : (-8.0 * A / one_8a).real() + gap / one_8re;
  GerfExponents e;
  e.rho1 = half_d * cplx(l1.real(), l1.imag() + 2.0 * M_PI * k) + c1 * S;
  e.rho3 = half_d * l3 + c3 * S;
  e.re_rho1_plus_rho3 = half_d * (l1.real() + l3) + c_sum * S;
  return e;
}

ThreePointForm gerf_three_point_form(const GerfParams& p, arma::uword d) {
  validate(p);
  const double s = p.s;
  const cplx A = p.A, one_4a = 1.0 - 4.0 * A, pp = 1.0 / (1.0 - 8.0 * A);
  const double q = 1.0 - 8.0 * A.real(), abs_4a = std::abs(one_4a);
  const GerfExponents e = gerf_exponents(p, d, 0.0);  // the constants, in gerf_exponents' cancellation-free forms
  ThreePointTerm holo;
  holo.a0 = e.rho1;
  holo.cx = s * pp;
  holo.cxy = pp;
  holo.cy = 2.0 * s * A * pp;
  holo.cyy = s * one_4a * pp;
  if (A.imag() == 0.0 && p.s == 1) return {{holo}};
  holo.weight = 0.5;
  ThreePointTerm herm;
  herm.weight = 0.5;
  herm.hermitian = true;
  herm.a0 = e.rho3;
  // s = -1: (|1-4A| - 4 Re A)/q = (|1-4A| - Re(1-4A))/q + 1, the difference written without cancellation.
  herm.cx = s > 0 ? (abs_4a + 4.0 * A.real()) / q : 16.0 * A.imag() * A.imag() / (abs_4a + one_4a.real()) / q + 1.0;
  herm.cxy = (s * abs_4a + 4.0 * std::conj(A)) / q;
  herm.cy = 2.0 * s * std::conj(A) / q;
  herm.cyy = abs_4a / q;
  return {{holo, herm}};
}

IsotropicForm gerf_isotropic_form(const GerfParams& p) {
  validate(p);
  return {p.s, static_cast<double>(p.s)};
}

double gerf_log_var_over_k2(const GerfParams& p, arma::uword d, double S) {
  if (p.A == cplx(0, 0) && p.s == -1) return log_cosh_minus_one(S);  // TrigRF: exact closed form
  const GerfExponents e = gerf_exponents(p, d, S);
  // Real A, s = +1: rho1 = rho3 = rho and Var/K^2 = e^rho - 1.
  if (p.A.imag() == 0.0 && p.s == 1) return e.rho3 <= 0 ? -kInf : log_expm1(e.rho3);
  const double u = e.rho1.real(), b = e.rho1.imag(), v = e.rho3;
  if (std::abs(u) < 30 && std::abs(v) < 30) {
    // Var/K^2 = (e^u cos b + e^v)/2 - 1 = expm1(m) cosh h + 2 sinh^2(h/2) - e^u sin^2(b/2), m = (u+v)/2, h = (u-v)/2:
    // no cancellation when the variance is tiny against the exponents (u ~ -S, v ~ S for s = -1 and A ~ 0).
    const double m = 0.5 * e.re_rho1_plus_rho3, h = 0.5 * (u - v), sh = std::sinh(0.5 * h), sb = std::sin(0.5 * b);
    const double var = std::expm1(m) * std::cosh(h) + 2.0 * sh * sh - std::exp(u) * sb * sb;
    return var > 0 ? std::log(var) : -kInf;
  }
  const SignedLog t = real_exp(e.rho1) + SignedLog::from_log(v) + SignedLog::from_value(-2.0);
  return t.sign > 0 ? t.log_abs - M_LN2 : -kInf;
}

HomogeneityStats homogeneity_stats(const arma::mat& X, const arma::mat& Y) {
  validate_sets(X, Y);
  HomogeneityStats st;
  st.d = X.n_rows;
  st.mean_x2 = arma::accu(arma::square(X)) / X.n_cols;
  st.mean_y2 = arma::accu(arma::square(Y)) / Y.n_cols;
  st.mean_xy = arma::dot(arma::mean(X, 1), arma::mean(Y, 1));
  return st;
}

GerfEstimator::GerfEstimator(std::string name, arma::uword d, GerfParams p) : p_(p) {
  validate(p_);
  require(d > 0, "dimension d must be > 0, got 0");
  d_ = d;
  info_.name = std::move(name);
  const bool real = p_.s == 1 && p_.A.imag() == 0.0;
  info_.complex = !real;
  info_.positive = real;
}

arma::mat GerfEstimator::log_var_hook(const PairGram& g) const {
  arma::mat S = pairwise_sq_norm_sum(g, p_.s);
  // The two real cases of gerf_log_var_over_k2 as array transforms (core/vecmath.hpp); the complex case entrywise.
  if (p_.A == cplx(0, 0) && p_.s == -1) {
    simd::log_cosh_minus_one(S.memptr(), S.n_elem);
    return S;
  }
  if (p_.A.imag() == 0.0 && p_.s == 1) {
    const double a = p_.A.real(), c = 0.5 * static_cast<double>(d_) * std::log1p(16.0 * a * a / (1.0 - 8.0 * a));
    return simd::log_expm1(S, 1.0 / (1.0 - 8.0 * a), c);  // log(e^rho - 1), rho = c + S / (1 - 8A) (gerf_exponents)
  }
  S.transform([&](double v) { return gerf_log_var_over_k2(p_, d_, v); });
  return S;
}

arma::mat GerfEstimator::features_hook(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale,
                                       bool log) const {
  if (!info_.complex) return from_exponent(real_exponent(w, X), log_row_scale, log);
  const arma::uword M = w.count();
  const double dd = static_cast<double>(d_);
  const double s = p_.s;
  const cplx B = std::sqrt(cplx(s) * (1.0 - 4.0 * p_.A));
  const cplx b_side = side == Side::Query ? B : s * B;
  const cplx log_d = 0.25 * dd * std::log(1.0 - 4.0 * p_.A);
  const arma::rowvec w2 = arma::sum(arma::square(w.omega), 0);
  const arma::colvec x2 = arma::sum(arma::square(X), 0).t();
  arma::colvec row = -0.5 * s * x2;  // per-point part of the exponent
  if (!log_row_scale.is_empty()) row += log_row_scale;
  const arma::mat proj = X.t() * w.omega;  // L x M
  arma::mat F(X.n_cols, 2 * M);
  const double sign_im = side == Side::Query ? 1.0 : -1.0;
  const arma::uword L = X.n_cols;
  for_each_block(M, [&](std::size_t m) {  // each feature writes its own two columns: any thread count
    // f = exp(lf), lf = log_d + A |w|^2 + b w^T x + row, as e^{Re lf} (cos Im lf, sin Im lf) with the
    // array exp/cos/sin of core/vecmath.hpp.
    const cplx c = log_d + p_.A * w2(m);
    double *re = F.colptr(m), *im = F.colptr(M + m);
    std::vector<double> phase(L);
    for (arma::uword i = 0; i < L; ++i) {
      re[i] = c.real() + b_side.real() * proj(i, m) + row(i);
      phase[i] = im[i] = c.imag() + b_side.imag() * proj(i, m);
    }
    simd::exp(re, L);
    simd::cos(phase.data(), L);
    simd::sin(im, L);
    for (arma::uword i = 0; i < L; ++i) {
      im[i] *= sign_im * re[i];
      re[i] *= phase[i];
    }
  });
  return F;
}

// real_exponent's pieces: P = B w, col = A |w|^2 + c, row = -|x|^2 / 2 (real A, s = +1 only).
std::optional<FeatureMap::Exponent> GerfEstimator::exponent_hook(const Draw* w, const arma::mat* X, Side) const {
  if (info_.complex) return std::nullopt;
  Exponent e;
  if (w) {
    const double B = std::sqrt(1.0 - 4.0 * p_.A.real());
    const double c = 0.25 * static_cast<double>(d_) * std::log(1.0 - 4.0 * p_.A.real());
    e.form = {B * w->omega, p_.A.real() * arma::sum(arma::square(w->omega), 0) + c};
  }
  if (X) e.points = {*X, -0.5 * arma::sum(arma::square(*X), 0).t()};
  return e;
}

arma::mat GerfEstimator::real_exponent(const Draw& w, const arma::mat& X) const {
  // Real A and s = +1: both sides are D exp(A|w|^2 + B w^T x - |x|^2/2) with real B.
  const double B = std::sqrt(1.0 - 4.0 * p_.A.real());
  const double c = 0.25 * static_cast<double>(d_) * std::log(1.0 - 4.0 * p_.A.real());
  const arma::rowvec col = p_.A.real() * arma::sum(arma::square(w.omega), 0) + c;
  const arma::vec row = -0.5 * arma::sum(arma::square(X), 0).t();
  arma::mat F = X.t() * w.omega;
  for (arma::uword m = 0; m < F.n_cols; ++m) {  // one pass: B w^T x + (A|w|^2 + c) - |x|^2/2
    double* f = F.colptr(m);
    for (arma::uword i = 0; i < F.n_rows; ++i) f[i] = B * f[i] + col[m] + row[i];
  }
  return F;
}

nlohmann::json GerfEstimator::state() const {
  return {{"family", info_.name}, {"d", d_}, {"A", state::of(p_.A)}, {"s", p_.s}};
}

std::unique_ptr<Estimator> restore_gerf(const nlohmann::json& j) {
  const double s = state::num(j, "s");
  require(s == 1 || s == -1, "estimator state field 's' must be +1 or -1, got {}", s);
  return std::make_unique<GerfEstimator>(j["family"].get<std::string>(), state::count(j, "d"),
                                         GerfParams{state::cx(j, "A"), static_cast<int>(s)});
}

nlohmann::json GerfEstimator::params() const {
  return {{"family", "gerf"}, {"A_re", p_.A.real()}, {"A_im", p_.A.imag()}, {"s", p_.s}};
}

}  // namespace kestrel
