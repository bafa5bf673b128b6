// Discretely-induced RFs: feature maps and exact variance (CRT eq. 9-11, 13, Thm 3.4-3.5, section 3.2.3);
// see discrete.hpp for the softmax form and the PoisRF+ / GeomRF+ rescaling.
#include "estimators/discrete/discrete.hpp"

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <gsl/gsl_sf_bessel.h>

#include "core/error.hpp"
#include "core/logmath.hpp"
#include "core/vecmath.hpp"
#include "estimators/discrete/geometric_kernel.hpp"
#include "estimators/state.hpp"

// The geometric kernel's helpers pass vectors to always-inline functions only (reported at the end of the file).
#pragma GCC diagnostic ignored "-Wpsabi"

namespace kestrel {

void validate(const DiscreteParams& q) {
  if (q.kind == DiscreteKind::Poisson) {
    require(std::isfinite(q.lambda) && q.lambda > 0, "PoisRF rate lambda must be finite and > 0, got {}", q.lambda);
  } else {
    require(std::isfinite(q.p) && q.p > 0 && q.p < 1, "GeomRF parameter p must lie in (0, 1), got {}", q.p);
  }
}

double discrete_log_pk(const DiscreteParams& q, unsigned k) {
  const double kk = static_cast<double>(k);
  if (q.kind == DiscreteKind::Poisson) return -q.lambda + kk * std::log(q.lambda) - std::lgamma(kk + 1);
  return std::log(q.p) + kk * std::log1p(-q.p);
}

namespace {

// c[k] = 1 / (k!)^2, the power-series coefficients of I0 in y = z^2/4.
const std::array<double, 25>& i0_series_coefficients() {
  static const auto coef = [] {
    std::array<double, 25> c{};
    double f = 1;
    c[0] = 1;
    for (int k = 1; k < 25; ++k) f *= k, c[k] = 1.0 / (f * f);
    return c;
  }();
  return coef;
}

}  // namespace

double log_bessel_i0(double z) {
  z = std::abs(z);
  const auto& c = i0_series_coefficients();
  const double y = 0.25 * z * z;
  if (z < 2) {
    // y <= 1: terms k <= 14 in Horner form (the first omitted one is < 1e-24 of the sum); log1p of the k >= 1 tail
    // keeps log I0 ~ y accurate for tiny z.
    double tail = c[14];
    for (int k = 13; k >= 1; --k) tail = c[k] + y * tail;
    return std::log1p(y * tail);
  }
  if (z < 6) {
    // y < 9: all 25 terms (the first omitted, y^25 / (25!)^2, is < 1e-26 of I0 >= 2.2). Positive terms, no
    // cancellation; cheaper than the GSL call, and most 2|x_l y_l|/sqrt(1-p) of unit-scale data fall here.
    double s = c[24];
    for (int k = 23; k >= 0; --k) s = c[k] + y * s;
    return std::log(s);
  }
  return z + std::log(gsl_sf_bessel_I0_scaled(z));  // I0_scaled(z) = e^{-z} I0(z), no overflow
}

namespace {

// h(t) of discrete_coord_log_m2 with the per-parameter constants hoisted out of the O(L^2 d) loop.
struct CoordLogM2 {
  bool poisson;
  double lambda, neg_log_p, scale;
  explicit CoordLogM2(const DiscreteParams& q)
      : poisson(q.kind == DiscreteKind::Poisson),
        lambda(q.lambda),
        neg_log_p(poisson ? 0.0 : -std::log(q.p)),
        scale(poisson ? 0.0 : 2.0 / std::sqrt(1.0 - q.p)) {}
  double operator()(double t) const {
    double h;
    if (poisson) {
      const double r = t - lambda;
      h = r * r / lambda;
    } else {
      h = neg_log_p + log_bessel_i0(scale * std::abs(t)) - 2.0 * t;
    }
    return h > 0 ? h : 0.0;
  }
};

}  // namespace

double discrete_coord_log_m2(const DiscreteParams& q, double t) { return CoordLogM2(q)(t); }

namespace {

// H(i, j) = sum_l h(x_il y_jl) for every pair: the O(L^2 d) hot path of the exact variance (bench/, issue #8).
// PoisRF: h(t) = (t - lambda)^2 / lambda, so lambda H = (X^2)^T (Y^2) - 2 lambda X^T Y + d lambda^2: two BLAS products.
// Entries small against (X^2)^T (Y^2) + d lambda^2 (x_l y_l close to lambda for all l) are summed directly.
arma::mat poisson_sums(const DiscreteParams& q, const arma::mat& X, const arma::mat& Y) {
  const double lambda = q.lambda, dl2 = static_cast<double>(X.n_rows) * lambda * lambda;
  const arma::mat T2 = arma::square(X).t() * arma::square(Y);
  arma::mat out = X.t() * Y;
  for (arma::uword k = 0; k < out.n_elem; ++k) out[k] = ((T2[k] + dl2) - 2 * lambda * out[k]) / lambda;
  recompute_cancelling(
      out, [&](arma::uword i, arma::uword j) { return (T2(i, j) + dl2) / lambda; },
      [&](arma::uword i, arma::uword j) {
        const double *x = X.colptr(i), *y = Y.colptr(j);
        double acc = 0;
        for (arma::uword l = 0; l < X.n_rows; ++l) acc += (x[l] * y[l] - lambda) * (x[l] * y[l] - lambda) / lambda;
        return acc;
      });
  return out;
}

using namespace geometric_detail;

// The points of X (its columns) as the rows of a (ldx x d) matrix, ldx a multiple of 8, zero rows after X's.
arma::mat point_rows(const arma::mat& X) {
  arma::mat out(X.n_cols + (8 - X.n_cols % 8) % 8, X.n_rows, arma::fill::zeros);
  out.head_rows(X.n_cols) = X.t();
  return out;
}

// Four pairs at a time, for AVX2 and FMA (Horner steps are fused multiply-adds) or baseline x86-64.
__attribute__((target_clones("arch=x86-64-v3", "default"))) void geometric_sums4(const GeomConstants& c,
                                                                                 const double* xt, arma::uword ldx,
                                                                                 const double* ys, arma::mat& out) {
  for (arma::uword j = 0; j < out.n_cols; ++j)
    for (arma::uword i = 0; i < out.n_rows; i += 4) {
      double h[4];
      geometric_lanes<Lanes4>(c, xt + i, ldx, ys + j * c.d, h);
      std::copy_n(h, std::min<arma::uword>(4, out.n_rows - i), out.colptr(j) + i);
    }
}

arma::mat geometric_sums(const DiscreteParams& q, const arma::mat& X, const arma::mat& Y) {
  GeomConstants c;
  c.d = X.n_rows;
  const double root1mp = std::sqrt(1.0 - q.p);
  c.neg_log_p = -std::log(q.p);
  c.scale = 2.0 / root1mp;
  // z - 2t = |t| (scale - 2) for t >= 0, without the cancellation: scale - 2 = 2 p / ((1 + sqrt(1-p)) sqrt(1-p)).
  c.scale_m2 = 2.0 * q.p / ((1.0 + root1mp) * root1mp);
  c.scale_p2 = c.scale + 2.0;
  const arma::mat xt = point_rows(X);
  arma::mat out(X.n_cols, Y.n_cols);
#ifdef KESTREL_GEOMETRIC_AVX512
  if (simd::active() == simd::Isa::Avx512) {
    geometric_sums8(c, xt.memptr(), xt.n_rows, Y.memptr(), out);
    return out;
  }
#endif
  geometric_sums4(c, xt.memptr(), xt.n_rows, Y.memptr(), out);
  return out;
}

}  // namespace

double discrete_log_var_from_sum(double H) { return H > 0 ? log_expm1(H) : -kInf; }

arma::mat discrete_pairwise_sums(const DiscreteParams& q, const arma::mat& X, const arma::mat& Y) {
  return q.kind == DiscreteKind::Poisson ? poisson_sums(q, X, Y) : geometric_sums(q, X, Y);
}

DiscreteEstimator::DiscreteEstimator(std::string name, arma::uword d, DiscreteParams q,
                                     std::optional<ShiftParams> shift)
    : q_(q), shift_(std::move(shift)) {
  validate(q_);
  require(d > 0, "dimension d must be > 0, got 0");
  d_ = d;
  if (shift_) {
    require(shift_->c.n_elem == d, "shift c has {} entries, dimension is {}", shift_->c.n_elem, d);
    require(shift_->c.is_finite(), "shift c must be finite");
    require(std::isfinite(shift_->epsilon) && shift_->epsilon > 0, "shift epsilon must be > 0, got {}",
            shift_->epsilon);
  }
  info_.name = std::move(name);
  info_.complex = false;
  info_.positive = shift_.has_value();  // shifted points are >= epsilon > 0, so every factor is > 0
  info_.projections = false;            // per-coordinate counts: draw_hook ignores the sampler
}

arma::mat DiscreteEstimator::log_var_hook(const PairGram& g) const {
  const arma::mat &X = g.X, &Y = g.Y;
  const arma::mat Xh = shift_ ? shift_points(*shift_, X) : X;
  const arma::mat Yh = shift_ ? shift_points(*shift_, Y) : Y;
  arma::mat out = discrete_pairwise_sums(q_, Xh, Yh);
  simd::log_expm1(out);  // discrete_log_var_from_sum as one array transform
  if (!shift_) return out;
  // Clamped inputs: add |x - y|^2 - |x_hat - y_hat|^2 (see discrete.hpp). With dx = x_hat - (x - c) >= 0 (zero
  // unless clamped), x_hat - y_hat = D + e with D = x - y, e = dx - dy, and D^2 - (D + e)^2 = -e (2D + e), which is
  // exactly 0 for unclamped coordinates.
  const arma::mat DX = Xh - (X.each_col() - shift_->c), DY = Yh - (Y.each_col() - shift_->c);
  const arma::uvec cx = arma::find(arma::any(DX != 0.0, 0)), cy = arma::find(arma::any(DY != 0.0, 0));
  if (cx.is_empty() && cy.is_empty()) return out;
  for (arma::uword j = 0; j < Y.n_cols; ++j) {
    for (arma::uword i = 0; i < X.n_cols; ++i) {
      double corr = 0;
      for (arma::uword l = 0; l < d_; ++l) {
        const double e = DX(l, i) - DY(l, j);
        if (e != 0) corr -= e * (2.0 * (X(l, i) - Y(l, j)) + e);
      }
      out(i, j) += corr;
    }
  }
  return out;
}

Draw DiscreteEstimator::draw_hook(arma::uword M, Rng& rng, Sampler) const {
  Draw w;
  w.counts.set_size(d_, M);
  for (double& k : w.counts) k = q_.kind == DiscreteKind::Poisson ? rng.poisson(q_.lambda) : rng.geometric0(q_.p);
  return w;
}

arma::mat DiscreteEstimator::features_hook(const Draw& w, const arma::mat& X, Side, const arma::vec& log_row_scale,
                                           bool log) const {
  require(w.count() > 0 && !w.counts.is_empty() && w.counts.is_finite() && w.counts.min() >= 0 &&
              arma::all(arma::vectorise(w.counts) == arma::floor(arma::vectorise(w.counts))),
          "discrete draws must hold non-negative integer counts");
  const arma::mat Xh = shift_ ? shift_points(*shift_, X) : X;
  // log|f| = base_m + pre_i + sum_l k_l log|x_l|, the sign is (-1)^(sum_l [x_l < 0] [k_l odd]), and f = 0 when some
  // x_l = 0 has k_l > 0 (x^0 = 1, also for x = 0): up to three matrix products, so BLAS does the O(L M d) work. The
  // indicator products are sums of at most d ones, exact in double. Zero and negative coordinates only need their
  // products when there are any (never for the shifted variants, rarely zeros in standardised data): skipping an
  // all-zero product changes no bit (issue #19).
  const bool has_zero = arma::any(arma::vectorise(Xh) == 0.0), has_negative = arma::any(arma::vectorise(Xh) < 0.0);
  arma::mat logabs = arma::log(arma::abs(Xh));
  if (has_zero) logabs.elem(arma::find(Xh == 0.0)).zeros();  // those entries are handled by `zeros`
  // Per-point log prefactor: the row scale and for the shifted variants (|x|^2 - |x_hat|^2)/2.
  arma::vec pre(X.n_cols, arma::fill::zeros);
  if (!log_row_scale.is_empty()) pre += log_row_scale;
  if (shift_) pre += 0.5 * (arma::sum(arma::square(X), 0) - arma::sum(arma::square(Xh), 0)).t();
  arma::mat F = logabs.t() * w.counts;
  F.each_row() += log_base(w);
  F.each_col() += pre;
  arma::mat zeros;  // number of x_l = 0 with k_l > 0, per entry
  if (has_zero) zeros = arma::conv_to<arma::mat>::from(Xh == 0.0).t() * arma::conv_to<arma::mat>::from(w.counts > 0.0);
  if (log) {  // positive (shifted) variants only: no negative coordinate, so F is the log itself
    if (has_zero) F.elem(arma::find(zeros > 0.5)).fill(-kInf);
    return F;
  }
  simd::exp(F.memptr(), F.n_elem);
  arma::mat parity;  // number of x_l < 0 with k_l odd, per entry
  if (has_negative)
    parity = arma::conv_to<arma::mat>::from(Xh < 0.0).t() * (w.counts - 2.0 * arma::floor(w.counts / 2.0));
  if (has_zero || has_negative)
    for (arma::uword k = 0; k < F.n_elem; ++k) {
      if (has_zero && zeros(k) > 0.5)
        F(k) = 0.0;
      else if (has_negative && (static_cast<std::uint64_t>(parity(k)) & 1u))
        F(k) = -F(k);  // parity: an exact count >= 0 (was fmod)
    }
  return F;
}

arma::rowvec DiscreteEstimator::log_base(const Draw& w) const {
  arma::rowvec base(w.count(), arma::fill::zeros);  // independent of x
  for (arma::uword m = 0; m < w.count(); ++m) {
    const double* k = w.counts.colptr(m);
    for (arma::uword l = 0; l < d_; ++l)
      base(m) -= 0.5 * (std::lgamma(k[l] + 1) + discrete_log_pk(q_, static_cast<unsigned>(k[l])));
  }
  return base;
}

std::optional<FeatureMap::Exponent> DiscreteEstimator::exponent_hook(const Draw* w, const arma::mat* X, Side) const {
  if (!shift_) return std::nullopt;  // signs and zeros: no exponent form
  Exponent e;
  if (w) e.form = {w->counts, log_base(*w)};
  if (X)
    e.points = {arma::log(shift_points(*shift_, *X)),  // x_hat >= epsilon > 0
                0.5 * (arma::sum(arma::square(*X), 0) - arma::sum(arma::square(shift_points(*shift_, *X)), 0)).t()};
  return e;
}

nlohmann::json DiscreteEstimator::state() const {
  nlohmann::json j = {{"family", info_.name}, {"d", d_},   {"kind", name_of(q_.kind)},
                      {"lambda", q_.lambda},  {"p", q_.p}, {"shifted", shift_.has_value()}};
  if (shift_) j["shift_c"] = state::of(arma::mat(shift_->c)), j["shift_epsilon"] = shift_->epsilon;
  return j;
}

std::unique_ptr<Estimator> restore_discrete(const nlohmann::json& j) {
  const std::string kind = j.value("kind", "");
  const std::optional<DiscreteKind> k = find_enum<DiscreteKind>(kind);
  require(k.has_value(), "estimator state field 'kind' must be {}", enum_choices<DiscreteKind>());
  const DiscreteParams q{*k, state::num(j, "lambda"), state::num(j, "p")};
  require(j.contains("shifted") && j["shifted"].is_boolean(), "estimator state has no boolean field 'shifted'");
  std::optional<ShiftParams> shift;
  if (j["shifted"].get<bool>())
    shift = ShiftParams{arma::vec(state::mat(j, "shift_c")), state::num(j, "shift_epsilon")};
  return std::make_unique<DiscreteEstimator>(j["family"].get<std::string>(), state::count(j, "d"), q, std::move(shift));
}

nlohmann::json DiscreteEstimator::params() const {
  nlohmann::json j;
  if (q_.kind == DiscreteKind::Poisson) {
    j = {{"family", shift_ ? "pois+" : "pois"}, {"lambda", q_.lambda}};
  } else {
    j = {{"family", shift_ ? "geom+" : "geom"}, {"p", q_.p}};
  }
  if (shift_) {
    j["shift_epsilon"] = shift_->epsilon;
    j["shift_c_min"] = shift_->c.min();
    j["shift_c_mean"] = arma::mean(shift_->c);
    j["shift_c_max"] = shift_->c.max();
  }
  return j;
}

}  // namespace kestrel
