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
#include "estimators/state.hpp"

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

// g(z) = sqrt(z) e^{-z} I0(z) for z >= 10, in [0.3989, 0.41]: a polynomial of degree 20 in v = 20/z - 1 in (-1, 1],
// the truncated Chebyshev series expanded in powers of v by scripts/i0_scaled_coefficients.py (mpmath, 40 digits),
// which also measures Horner's rule in double against mpmath: relative error < 1.3e-16. It replaces GSL's I0_scaled
// (still used by the scalar log_bessel_i0) in the O(L^2 d) loop.
constexpr double kI0Scaled[21] = {0.4015097608312065,      0.0026458859671862067,   8.311327263746293e-05,
                                  5.152033951115746e-06,   5.041257378688805e-07,   7.078400543122324e-08,
                                  1.3635390827610584e-08,  3.55945128887591e-09,    1.278846217212222e-09,
                                  6.336578247222871e-10,   3.767890985348601e-10,   1.513520394748074e-10,
                                  -1.1556828766337455e-10, -2.4215294661511267e-10, -8.979142051200204e-11,
                                  1.0151801399103754e-10,  7.722878887779968e-11,   -2.4081328837183918e-11,
                                  -2.7656714709875805e-11, 2.7372888173202832e-12,  4.2372651227844825e-12};
// q(y) = (I0(2 sqrt(y)) - 1) / y for 0 <= y < 25 (z < 10): the Taylor series 1/((k+1)!)^2 of log_bessel_i0
// economised to degree 16 on [0, 25] (Chebyshev truncation, same script; the dropped part is < 3.1e-18, relatively
// less as q >= 1). The coefficients stay positive and close to Taylor's, so u = y q(y) keeps its relative precision for
// tiny y (measured < 4e-16 relative in double, as for the 25-term Taylor series) with 16 Horner steps instead of 23.
constexpr double kI0Series[17] = {1.0,
                                  0.24999999999999992,
                                  0.027777777777778043,
                                  0.0017361111111107064,
                                  6.94444444447673e-05,
                                  1.9290123455228403e-06,
                                  3.936759894118852e-08,
                                  6.151187216571863e-10,
                                  7.594060181800163e-12,
                                  7.594037934855533e-14,
                                  6.276259327124733e-16,
                                  4.3572372793758506e-18,
                                  2.5844619244483355e-20,
                                  1.2964195216166434e-22,
                                  6.325234908933852e-25,
                                  1.5073188714454955e-27,
                                  1.5159995446357626e-29};

// GCC vector extension: 4 doubles (one AVX2 register, two SSE2 registers on baseline x86-64).
using V4 = double __attribute__((vector_size(4 * sizeof(double))));
using M4 = long long __attribute__((vector_size(4 * sizeof(double))));
constexpr arma::uword kBlock = 16;  // coordinates per step: four independent Horner chains
// z < kZSeries: u = I0(z) - 1 = y q(y), y = z^2/4 < 25 (kI0Series). z >= kZSeries: g(z) (kI0Scaled).
constexpr double kZSeries = 10.0;

inline __attribute__((always_inline)) bool any(M4 m) { return (m[0] | m[1] | m[2] | m[3]) != 0; }

// Columns of A copied to a zero-padded (dp x n) array, dp a multiple of kBlock: a padded coordinate has t = 0.
std::vector<double> padded_columns(const arma::mat& A, arma::uword dp) {
  std::vector<double> out(dp * A.n_cols, 0.0);
  for (arma::uword j = 0; j < A.n_cols; ++j) std::memcpy(out.data() + j * dp, A.colptr(j), A.n_rows * sizeof(double));
  return out;
}

// GeomRF: H = sum_l h_l, h_l = -log p - 2 t_l + log I0(z_l), z_l = 2|t_l|/sqrt(1-p), over groups of 64 coordinates,
// 16 at a time (four vectors of 4: independent Horner chains in registers).
// z_l < 10 (most coordinates of unit-scale data): u_l = I0(z_l) - 1 from the economised series kI0Series. The u_l
// of a group are multiplied as P <- P + u + P u in four chains (coordinate l in chain l mod 4), so that
// P = prod (1 + u_l) - 1 keeps its relative precision when every u_l is tiny, and the group adds log1p(P): one log per
// 64 coordinates, with the accuracy of summing log1p(u_l) (the log of the rounded product would lose ~d eps absolute,
// 1e-6 of log Var at H ~ 1e-11: issue #21). Each 1 + u_l lies in [1, 2816), so a group cannot overflow (< 1e221).
// 10 <= z_l finite (most coordinates of the shifted points of GeomRF+): log I0(z) = z - log(z)/2 + log g(z). The
// coordinate's linear term becomes -log p + z - 2t, with z - 2t = |t| (scale - 2) for t >= 0: the shifted points have
// t ~ 10, z ~ 2t, and summing z and -2t separately lost ~1e-12 of H ~ 70 to cancellation. The g(z) of a group, in
// [0.39, 0.41], and the significands m of z = m 2^e, in [1, 2), are multiplied (64 factors: in [6e-27, 2^64]), and
// the exponents e summed exactly: a group adds log prod g - (log prod m) / 2 and the pair - (ln2 sum e) / 2. When
// P >= 1 a group takes one log for the three products (at most three otherwise) instead of one GSL call and one log per
// coordinate. Non-finite z_l (x_l y_l overflowed) use log_bessel_i0.
// H >= 0 holds exactly; rounding below 0 is clamped to 0.
__attribute__((target_clones("arch=x86-64-v3", "default")))  // AVX2 and FMA: Horner steps are fused multiply-adds
arma::mat
geometric_sums(const DiscreteParams& q, const arma::mat& X, const arma::mat& Y) {
  const arma::uword d = X.n_rows, dp = (d + kBlock - 1) / kBlock * kBlock;
  const double neg_log_p = -std::log(q.p), root1mp = std::sqrt(1.0 - q.p), scale = 2.0 / root1mp;
  // z - 2t = |t| (scale - 2) for t >= 0, without the cancellation: scale - 2 = 2 p / ((1 + sqrt(1-p)) sqrt(1-p)).
  const double scale_m2 = 2.0 * q.p / ((1.0 + root1mp) * root1mp), scale_p2 = scale + 2.0;
  const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;  // ln2_hi e exact
  const std::vector<double> xs = padded_columns(X, dp), ys = padded_columns(Y, dp);
  const V4 zero = {}, one = zero + 1, lane = {0, 1, 2, 3};
  const M4 izero = {}, abs_mask = izero + 0x7fffffffffffffffLL, significand = izero + 0x000fffffffffffffLL,
           exponent_zero = izero + 0x3ff0000000000000LL;
  arma::mat out(X.n_cols, Y.n_cols);
  for (arma::uword j = 0; j < Y.n_cols; ++j) {
    const double* y = ys.data() + j * dp;
    for (arma::uword i = 0; i < X.n_cols; ++i) {
      const double* x = xs.data() + i * dp;
      V4 lin = zero;  // lane k: coordinates l = k mod 4, in order
      M4 esum = izero;
      double logs = 0, big = 0;
      bool any_huge = false;
      for (arma::uword l0 = 0; l0 < dp; l0 += 64) {
        const arma::uword l1 = std::min(dp, l0 + 64);
        V4 pm = zero, pg = one, pz = one;
        bool group_mid = false;
        for (arma::uword l = l0; l < l1; l += kBlock) {
          V4 t[4], z[4], y4[4];
          M4 mid[4], small_any = izero, mid_any = izero;
          for (int b = 0; b < 4; ++b) {
            V4 xv, yv;
            std::memcpy(&xv, x + l + 4 * b, sizeof xv);
            std::memcpy(&yv, y + l + 4 * b, sizeof yv);
            t[b] = xv * yv;
            const V4 at = (V4)((M4)t[b] & abs_mask);
            z[b] = scale * at;
            const M4 small = z[b] < kZSeries;
            mid[b] = (z[b] >= kZSeries) & (z[b] <= DBL_MAX);
            any_huge |= any(~(small | mid[b]));  // NaN or inf
            small_any |= small;
            mid_any |= mid[b];
            const M4 valid = (lane + static_cast<double>(l + 4 * b)) < static_cast<double>(d);
            lin += valid ? neg_log_p + (mid[b] ? at * (t[b] >= 0.0 ? zero + scale_m2 : zero + scale_p2) : -2.0 * t[b])
                         : zero;
            y4[b] = small ? 0.25 * z[b] * z[b] : zero;  // 0: the series gives I0 = 1 (log 1 = 0)
          }
          // The series and the g polynomial are independent Horner chains: a block needing both runs them in one loop
          // (eight chains, bound by throughput rather than by the latency of four).
          const bool has_small = any(small_any), has_mid = any(mid_any);
          V4 s[4], g[4], zz[4], v[4];
          for (int b = 0; b < 4; ++b) {
            s[b] = zero + kI0Series[16];
            g[b] = zero + kI0Scaled[20];
            zz[b] = mid[b] ? z[b] : zero + kZSeries;  // a harmless value in the other lanes
            v[b] = has_mid ? 20.0 / zz[b] - 1.0 : zero;
          }
          if (has_small && has_mid) {
#pragma GCC unroll 20
            for (int k = 19; k >= 0; --k) {
              for (int b = 0; b < 4; ++b) g[b] = kI0Scaled[k] + v[b] * g[b];
              if (k <= 15)
                for (int b = 0; b < 4; ++b) s[b] = kI0Series[k] + y4[b] * s[b];
            }
          } else if (has_small) {
            for (int k = 15; k >= 0; --k)
              for (int b = 0; b < 4; ++b) s[b] = kI0Series[k] + y4[b] * s[b];
          } else if (has_mid) {
            for (int k = 19; k >= 0; --k)
              for (int b = 0; b < 4; ++b) g[b] = kI0Scaled[k] + v[b] * g[b];
          }
          if (has_small) {
            for (int b = 0; b < 4; ++b) {
              const V4 u = y4[b] * s[b];
              pm += u + pm * u;
            }
          }
          if (has_mid) {
            group_mid = true;
            for (int b = 0; b < 4; ++b) {
              const M4 bits = (M4)zz[b];
              pg *= mid[b] ? g[b] : one;
              pz *= mid[b] ? (V4)((bits & significand) | exponent_zero) : one;
              esum += mid[b] ? (bits >> 52) - 1023 : izero;
            }
          }
        }
        const double p01 = pm[0] + pm[1] + pm[0] * pm[1], p23 = pm[2] + pm[3] + pm[2] * pm[3];
        const double P = p01 + p23 + p01 * p23;
        const double G = group_mid ? (pg[0] * pg[1]) * (pg[2] * pg[3]) : 1.0;
        const double Z = group_mid ? (pz[0] * pz[1]) * (pz[2] * pz[3]) : 1.0;
        if (P >= 1.0) {
          // log1p(P) is only needed for small P; here 1 + P rounds with relative error eps, and one log takes all
          // three products (1 + P < 1e221, G in [6e-27, 1], Z in [1, 2^64]).
          logs += std::log((1.0 + P) * G / std::sqrt(Z));
        } else {
          logs += std::log1p(P);
          if (group_mid) big += std::log(G) - 0.5 * std::log(Z);
        }
      }
      if (any_huge) {
        for (arma::uword l = 0; l < d; ++l) {
          const double z = scale * std::abs(x[l] * y[l]);
          if (!(z <= DBL_MAX)) big += log_bessel_i0(z);
        }
      }
      const double e = static_cast<double>((esum[0] + esum[1]) + (esum[2] + esum[3]));
      big -= 0.5 * (e * ln2_hi + e * ln2_lo);
      const double lsum = (lin[0] + lin[1]) + (lin[2] + lin[3]);
      out(i, j) = std::max(lsum + big + logs, 0.0);
    }
  }
  return out;
}

}  // namespace

double discrete_log_var_from_sum(double H) { return H > 0 ? log_expm1(H) : -kInf; }

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
}

arma::mat DiscreteEstimator::log_var_hook(const PairGram& g) const {
  const arma::mat &X = g.X, &Y = g.Y;
  const arma::mat Xh = shift_ ? shift_points(*shift_, X) : X;
  const arma::mat Yh = shift_ ? shift_points(*shift_, Y) : Y;
  arma::mat out = q_.kind == DiscreteKind::Poisson ? poisson_sums(q_, Xh, Yh) : geometric_sums(q_, Xh, Yh);
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
  w.omega.set_size(d_, M);
  for (double& k : w.omega) k = q_.kind == DiscreteKind::Poisson ? rng.poisson(q_.lambda) : rng.geometric0(q_.p);
  return w;
}

arma::mat DiscreteEstimator::features_hook(const Draw& w, const arma::mat& X, Side, const arma::vec& log_row_scale,
                                           bool log) const {
  require(w.count() > 0 && w.omega.is_finite() && w.omega.min() >= 0 &&
              arma::all(arma::vectorise(w.omega) == arma::floor(arma::vectorise(w.omega))),
          "discrete draws must hold non-negative integer counts");
  const arma::uword M = w.count();
  const arma::mat Xh = shift_ ? shift_points(*shift_, X) : X;
  // log|f| = base_m + pre_i + sum_l k_l log|x_l|, the sign is (-1)^(sum_l [x_l < 0] [k_l odd]), and f = 0 when some
  // x_l = 0 has k_l > 0 (x^0 = 1, also for x = 0): up to three matrix products, so BLAS does the O(L M d) work. The
  // indicator products are sums of at most d ones, exact in double. Zero and negative coordinates only need their
  // products when there are any (never for the shifted variants, rarely zeros in standardised data): skipping an
  // all-zero product changes no bit (issue #19).
  const bool has_zero = arma::any(arma::vectorise(Xh) == 0.0), has_negative = arma::any(arma::vectorise(Xh) < 0.0);
  arma::mat logabs = arma::log(arma::abs(Xh));
  if (has_zero) logabs.elem(arma::find(Xh == 0.0)).zeros();  // those entries are handled by `zeros`
  // Per-point log prefactor: the row scale, 1/sqrt(M), and for the shifted variants (|x|^2 - |x_hat|^2)/2.
  arma::vec pre(X.n_cols);
  pre.fill(-0.5 * std::log(static_cast<double>(M)));
  if (!log_row_scale.is_empty()) pre += log_row_scale;
  if (shift_) pre += 0.5 * (arma::sum(arma::square(X), 0) - arma::sum(arma::square(Xh), 0)).t();
  arma::rowvec base(M);  // sum_l -(log k_l! + log p_{k_l}) / 2, independent of x
  for (arma::uword m = 0; m < M; ++m) {
    const double* k = w.omega.colptr(m);
    base(m) = 0;
    for (arma::uword l = 0; l < d_; ++l)
      base(m) -= 0.5 * (std::lgamma(k[l] + 1) + discrete_log_pk(q_, static_cast<unsigned>(k[l])));
  }
  arma::mat F = logabs.t() * w.omega;
  F.each_row() += base;
  F.each_col() += pre;
  arma::mat zeros;  // number of x_l = 0 with k_l > 0, per entry
  if (has_zero) zeros = arma::conv_to<arma::mat>::from(Xh == 0.0).t() * arma::conv_to<arma::mat>::from(w.omega > 0.0);
  if (log) {  // positive (shifted) variants only: no negative coordinate, so F is the log itself
    if (has_zero) F.elem(arma::find(zeros > 0.5)).fill(-kInf);
    return F;
  }
  simd::exp(F.memptr(), F.n_elem);
  arma::mat parity;  // number of x_l < 0 with k_l odd, per entry
  if (has_negative)
    parity = arma::conv_to<arma::mat>::from(Xh < 0.0).t() * (w.omega - 2.0 * arma::floor(w.omega / 2.0));
  if (has_zero || has_negative)
    for (arma::uword k = 0; k < F.n_elem; ++k) {
      if (has_zero && zeros(k) > 0.5)
        F(k) = 0.0;
      else if (has_negative && (static_cast<std::uint64_t>(parity(k)) & 1u))
        F(k) = -F(k);  // parity: an exact count >= 0 (was fmod)
    }
  return F;
}

nlohmann::json DiscreteEstimator::state() const {
  nlohmann::json j = {
      {"family", info_.name}, {"d", d_},   {"kind", q_.kind == DiscreteKind::Poisson ? "poisson" : "geometric"},
      {"lambda", q_.lambda},  {"p", q_.p}, {"shifted", shift_.has_value()}};
  if (shift_) j["shift_c"] = state::of(arma::mat(shift_->c)), j["shift_epsilon"] = shift_->epsilon;
  return j;
}

std::unique_ptr<Estimator> restore_discrete(const nlohmann::json& j) {
  const std::string kind = j.value("kind", "");
  require(kind == "poisson" || kind == "geometric", "estimator state field 'kind' must be poisson or geometric");
  const DiscreteParams q{kind == "poisson" ? DiscreteKind::Poisson : DiscreteKind::Geometric, state::num(j, "lambda"),
                         state::num(j, "p")};
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
