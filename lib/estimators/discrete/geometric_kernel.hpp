// GeomRF's pairwise sums H = sum_l h(x_l y_l) (CRT eq. 13 divided by K^2): the vectorised kernel shared by
// discrete.cpp (4 pairs per vector: AVX2 or baseline x86-64) and geometric_avx512.cpp (8 pairs). Internal header.
#pragma once
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include <armadillo>

#include "estimators/discrete/discrete.hpp"

// Vectors passed to and returned by always-inline helpers: no call ABI is involved.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace kestrel::geometric_detail {

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

// z < kZSeries: u = I0(z) - 1 = y q(y), y = z^2/4 < 25 (kI0Series). z >= kZSeries: g(z) (kI0Scaled).
constexpr double kZSeries = 10.0;

// ln 2 = kLn2Hi + kLn2Lo, kLn2Hi with trailing zero bits so that e kLn2Hi is exact for the exponents e met here.
constexpr double kLn2Hi = 6.93147180369123816490e-01, kLn2Lo = 1.90821492927058770002e-10;

struct GeomConstants {
  arma::uword d;
  double neg_log_p, scale, scale_m2, scale_p2;
};

// GeomRF: H = sum_l h_l, h_l = -log p - 2 t_l + log I0(z_l), z_l = 2|t_l|/sqrt(1-p). A vector holds W pairs
// (x_i, y), i = i0 ... i0 + W - 1, one per lane, so a lane does exactly what a scalar loop over the coordinates of its
// pair would do: every lane width gives the same bits (test
// DiscreteClosedForm.GeometricSumsGiveTheSameBitsAtEveryWidth). z_l < 10 (most coordinates of unit-scale data): u_l =
// I0(z_l) - 1 from the economised series kI0Series. The u_l of a group are multiplied in order as P <- P + u + P u, so
// that P = prod (1 + u_l) - 1 keeps its relative precision when every u_l is tiny, and the group adds log1p(P): one log
// per 64 coordinates, with the accuracy of summing log1p(u_l) (the log of the rounded product would lose ~d eps
// absolute, 1e-6 of log Var at H ~ 1e-11: issue #21). Each 1 + u_l lies in [1, 2816), so a group cannot overflow (<
// 1e221). 10 <= z_l finite (most coordinates of the shifted points of GeomRF+): log I0(z) = z - log(z)/2 + log g(z).
// The coordinate's linear term becomes -log p + z - 2t, with z - 2t = |t| (scale - 2) for t >= 0: the shifted points
// have t ~ 10, z ~ 2t, and summing z and -2t separately lost ~1e-12 of H ~ 70 to cancellation. The g(z) of a group, in
// [0.39, 0.41], and the significands m of z = m 2^e, in [1, 2), are multiplied (64 factors: in [6e-27, 2^64]), and
// the exponents e summed exactly: a group adds log prod g - (log prod m) / 2 and the pair - (ln2 sum e) / 2. When
// P >= 1 a group takes one log for the three products (at most three otherwise) instead of one GSL call and one log per
// coordinate. Non-finite z_l (x_l y_l overflowed) use log_bessel_i0.
// H >= 0 holds exactly; rounding below 0 is clamped to 0.

// Lane policy of geometric_lanes: 4 pairs in GCC's vector extension (AVX2 + FMA, or two SSE2 registers).
struct Lanes4 {
  static constexpr int kWidth = 4;
  using V = double __attribute__((vector_size(4 * sizeof(double))));
  using I = long long __attribute__((vector_size(4 * sizeof(double))));
  using M = I;  // a lane mask is -1 or 0
  static V load(const double* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static M lt(V a, V b) { return a < b; }
  static M ge(V a, V b) { return a >= b; }
  static M le(V a, V b) { return a <= b; }
  static V sel(M m, V a, V b) { return m ? a : b; }
  static I sel(M m, I a, I b) { return m ? a : b; }
  static M both(M a, M b) { return a & b; }
  static M either(M a, M b) { return a | b; }
  static M neither(M a, M b) { return ~(a | b); }
  static M none() { return M{}; }
  static bool any(M m) { return (m[0] | m[1] | m[2] | m[3]) != 0; }
  static V sqrt(V a) {  // lane by lane (IEEE: the bits of vsqrtpd)
    for (int k = 0; k < 4; ++k) a[k] = std::sqrt(a[k]);
    return a;
  }
  // 1/z to single precision (z below FLT_MAX): an IEEE float division, so the same bits at every width
  static V recip_seed(V z) {
    using F = float __attribute__((vector_size(4 * sizeof(float))));
    return __builtin_convertvector(1.0f / __builtin_convertvector(z, F), V);
  }
};

// 1/z for z in {1} or [10, inf) without a double division (16 cycles for 8 lanes on AVX-512): the float reciprocal
// (relative error < 2^-23) and two Newton steps r <- r + r (1 - z r) (2^-46, then within an ulp or two). z >= 1e30
// takes 1/1e30, which gives the same v = 20/z - 1 = -1 in double.
template <class Lanes, class V = typename Lanes::V>
inline __attribute__((always_inline)) V reciprocal(V z) {
  const V zero = {}, cap = zero + 1e30;
  const V zc = Lanes::sel(Lanes::lt(z, cap), z, cap);
  V r = Lanes::recip_seed(zc);
  r = r + r * (1.0 - zc * r);
  return r + r * (1.0 - zc * r);
}

// The running state of W pairs in geometric_lanes: per lane the linear terms, the exponents of the mid-range z, the
// group's products (series terms pm, scaled I0's pg, significands pz), which lanes met a mid-range z, and the sum of z.
// The coordinate vectors that need the series (some lane has a small z) or the scaled I0 (some lane has a mid-range
// z) wait in a queue of 8 for their polynomial, so each runs as eight independent Horner chains on just the vectors
// that need it (GeomRF on unit-scale data: 1.6% of z are mid-range, in 8.6% of vectors, but 64% of blocks of eight).
template <class Lanes>
struct GeomState {
  using V = typename Lanes::V;
  using I = typename Lanes::I;
  using M = typename Lanes::M;
  V lin, pm, pg, pz;
  V zsum;  // the z summed: not finite where some z is NaN or inf (or, harmlessly, where the sum overflowed)
  I esum;
  M group_mid;
  // queued: y4 = z^2/4 where small (0 elsewhere); zz = z where mid-range, 1 elsewhere (its v = 19 gives a finite g,
  // not used, and its significand and exponent multiply and add exactly nothing)
  V y4[8], zz[8];
  M mid[8];
  int n_small = 0, n_mid = 0;
};

// The queued series terms u = y4 q(y4) joined to pm in coordinate order (a padded slot has y4 = 0: u = 0 exactly).
template <class Lanes>
inline __attribute__((always_inline)) void run_series(GeomState<Lanes>& st) {
  using V = typename Lanes::V;
  const V zero = {};
  for (int b = st.n_small; b < 8; ++b) st.y4[b] = zero;
  V s[8];
  for (int b = 0; b < 8; ++b) s[b] = zero + kI0Series[16];
  for (int k = 15; k >= 0; --k)
    for (int b = 0; b < 8; ++b) s[b] = kI0Series[k] + st.y4[b] * s[b];
  for (int b = 0; b < 8; ++b) {
    const V u = st.y4[b] * s[b];
    st.pm += u + st.pm * u;
  }
  st.n_small = 0;
}

// The queued scaled I0's g(zz) and significands of zz joined to pg, pz and esum where the lane is mid-range (a padded
// slot has no lane).
template <class Lanes>
inline __attribute__((always_inline)) void run_scaled(GeomState<Lanes>& st) {
  using V = typename Lanes::V;
  using I = typename Lanes::I;
  const V zero = {}, one = zero + 1;
  const I izero = {}, significand = izero + 0x000fffffffffffffLL, exponent_zero = izero + 0x3ff0000000000000LL;
  for (int b = 0; b < st.n_mid; ++b) st.group_mid = Lanes::either(st.group_mid, st.mid[b]);
  for (int b = st.n_mid; b < 8; ++b) {
    st.zz[b] = one;
    st.mid[b] = Lanes::none();
  }
  V g[8], v[8];
  for (int b = 0; b < 8; ++b) {
    v[b] = 20.0 * reciprocal<Lanes>(st.zz[b]) - 1.0;
    g[b] = zero + kI0Scaled[20];
  }
  for (int k = 19; k >= 0; --k)
    for (int b = 0; b < 8; ++b) g[b] = kI0Scaled[k] + v[b] * g[b];
  for (int b = 0; b < 8; ++b) {
    const I bits = (I)st.zz[b];
    st.pg *= Lanes::sel(st.mid[b], g[b], one);
    st.pz *= (V)((bits & significand) | exponent_zero);  // zz = 1 = 2^0 1 where not mid-range: exact
    st.esum += (bits >> 52) - 1023;
  }
  st.n_mid = 0;
}

// Coordinate l of the W pairs (x row xt + l ldx, y[l]): its linear term, and its vector queued for the polynomials
// its lanes need (a lane that does not need one adds an exact 0 or multiplies by an exact 1).
template <class Lanes>
inline __attribute__((always_inline)) void geometric_coordinate(const GeomConstants& c, const double* xt,
                                                                arma::uword ldx, const double* y, arma::uword l,
                                                                GeomState<Lanes>& st) {
  using V = typename Lanes::V;
  using I = typename Lanes::I;
  using M = typename Lanes::M;
  const V zero = {};
  const I abs_mask = I{} + 0x7fffffffffffffffLL;
  const V t = Lanes::load(xt + l * ldx) * y[l];
  const V at = (V)((I)t & abs_mask);
  const V z = c.scale * at;
  const M small = Lanes::lt(z, zero + kZSeries);
  const M mid = Lanes::both(Lanes::ge(z, zero + kZSeries), Lanes::le(z, zero + DBL_MAX));
  st.zsum += z;
  st.lin += Lanes::sel(mid, at * Lanes::sel(Lanes::ge(t, zero), zero + c.scale_m2, zero + c.scale_p2), -2.0 * t);
  // Written to the next slot always, kept (the count moved on) only when some lane needs it.
  st.y4[st.n_small] = Lanes::sel(small, 0.25 * z * z, zero);
  st.n_small += Lanes::any(small);
  if (st.n_small == 8) run_series(st);
  st.zz[st.n_mid] = Lanes::sel(mid, z, zero + 1.0);
  st.mid[st.n_mid] = mid;
  st.n_mid += Lanes::any(mid);
  if (st.n_mid == 8) run_scaled(st);
}

// log e 2 + log(1 + f) for e an integer and f in [sqrt(1/2) - 1, sqrt(2) - 1], lane by lane with the same operations
// at every width: log(1 + f) = 2 atanh(s) = f - s (f - R), s = f / (2 + f) (|s| < 0.1716), R = 2 (s^2/3 + s^4/5 + ...
// + s^24/25) from atanh's Taylor series (the first term left out is < 1e-21 of R), so f's own bits lead and the
// roundings of s only touch the small s (f - R): within about an ulp of std::log.
template <class V>
inline __attribute__((always_inline)) V log_parts(V e, V f) {
  const V s = f / (2.0 + f), z = s * s;
  V q = V{} + 2.0 / 25;
  for (int k = 11; k >= 1; --k) q = 2.0 / (2 * k + 1) + z * q;
  const V R = z * q;
  return e * kLn2Hi - ((s * (f - R) - e * kLn2Lo) - f);
}

// log x of positive normal x: x = 2^e m with m in [sqrt(1/2), sqrt(2)), then log_parts(e, m - 1) (m - 1 is exact).
template <class Lanes, class V = typename Lanes::V>
inline __attribute__((always_inline)) V log_lanes(V x) {
  using I = typename Lanes::I;
  const V zero = {};
  const I izero = {}, bits = (I)x;
  // the exponent field as a double: 2^52 + field, less 2^52 + 1023 (exact)
  V e = (V)((bits >> 52) | (izero + 0x4330000000000000LL)) - (4503599627370496.0 + 1023.0);
  V m = (V)((bits & (izero + 0x000fffffffffffffLL)) | (izero + 0x3ff0000000000000LL));
  const auto high = Lanes::lt(zero + 1.4142135623730951, m);
  m = Lanes::sel(high, 0.5 * m, m);
  e = Lanes::sel(high, e + 1.0, e);
  return log_parts(e, m - 1.0);
}

// log1p(P) of P in [0, 1): log_parts(0, P) below sqrt(2) - 1 (P's relative precision kept for tiny P), else log(1 + P).
template <class Lanes, class V = typename Lanes::V>
inline __attribute__((always_inline)) V log1p_lanes(V P) {
  const V zero = {};
  const auto low = Lanes::lt(P, zero + 0.41421356237309503);
  return Lanes::sel(low, log_parts(zero, P), log_lanes<Lanes>(1.0 + P));
}

// The end of a group of 64 coordinates: each lane's products folded into its logs (log1p where the series product is
// below 1) and big terms.
template <class Lanes, class V = typename Lanes::V>
inline __attribute__((always_inline)) void fold_group(const GeomState<Lanes>& st, V& logs, V& big) {
  const V zero = {}, one = zero + 1;
  const V P = st.pm, G = Lanes::sel(st.group_mid, st.pg, one), Z = Lanes::sel(st.group_mid, st.pz, one);
  const auto large = Lanes::ge(P, one);
  // P >= 1: 1 + P rounds with relative error eps, and one log takes all three products (1 + P < 1e221, G in
  // [6e-27, 1], Z in [1, 2^64]).
  if (Lanes::any(large)) logs += Lanes::sel(large, log_lanes<Lanes>((1.0 + P) * G / Lanes::sqrt(Z)), zero);
  const auto below = Lanes::neither(large, Lanes::none());
  if (Lanes::any(below)) {
    logs += Lanes::sel(below, log1p_lanes<Lanes>(P), zero);
    const auto mid = Lanes::both(below, st.group_mid);
    if (Lanes::any(mid)) big += Lanes::sel(mid, log_lanes<Lanes>(G) - 0.5 * log_lanes<Lanes>(Z), zero);
  }
}

// H of the W pairs (x_{i0 + k}, y), k < W, with x_{i0 + k, l} at xt[l ldx + k]: groups of 64 coordinates, then each
// lane's sum: the log I0 of coordinates whose z overflowed, the
// exponents of the mid-range z (times ln 2), the linear terms and the groups' logs, clamped at 0 (the sum is >= 0).
template <class Lanes>
inline __attribute__((always_inline)) void geometric_lanes(const GeomConstants& c, const double* xt, arma::uword ldx,
                                                           const double* y, double* out) {
  constexpr int W = Lanes::kWidth;
  using V = typename Lanes::V;
  const V zero = {}, one = zero + 1;
  GeomState<Lanes> st;
  st.lin = zero;
  st.zsum = zero;
  st.esum = typename Lanes::I{};
  V logs = zero, big = zero;
  for (arma::uword l0 = 0; l0 < c.d; l0 += 64) {
    const arma::uword l1 = std::min(c.d, l0 + 64);
    st.pm = zero;
    st.pg = one;
    st.pz = one;
    st.group_mid = Lanes::none();
    for (arma::uword l = l0; l < l1; ++l) geometric_coordinate<Lanes>(c, xt, ldx, y, l, st);
    if (st.n_small > 0) run_series(st);
    if (st.n_mid > 0) run_scaled(st);
    fold_group<Lanes>(st, logs, big);
  }
  const double d_log_p = static_cast<double>(c.d) * c.neg_log_p;  // the coordinates' -log p, added once
  for (int k = 0; k < W; ++k) {
    double b = big[k];
    if (!(st.zsum[k] <= DBL_MAX)) {
      for (arma::uword l = 0; l < c.d; ++l) {
        const double z = c.scale * std::abs(xt[l * ldx + k] * y[l]);
        if (!(z <= DBL_MAX)) b += log_bessel_i0(z);
      }
    }
    const double e = static_cast<double>(st.esum[k]);
    b -= 0.5 * (e * kLn2Hi + e * kLn2Lo);
    out[k] = std::max(st.lin[k] + d_log_p + b + logs[k], 0.0);
  }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KESTREL_GEOMETRIC_AVX512 1
// Eight pairs at a time in AVX-512's lanes (geometric_avx512.cpp; call only when simd::active() is AVX-512). xt holds
// the points of X as rows (ldx = its row count, a multiple of 8, zero rows after X's n_cols), ys those of Y as columns.
void geometric_sums8(const GeomConstants& c, const double* xt, arma::uword ldx, const double* ys, arma::mat& out);
#endif

}  // namespace kestrel::geometric_detail

#pragma GCC diagnostic pop
