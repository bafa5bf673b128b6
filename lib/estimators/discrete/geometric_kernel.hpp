// GeomRF's pairwise sums H = sum_l h(x_l y_l) (CRT eq. 13 divided by K^2): the vectorised kernel shared by
// discrete.cpp (4 lanes: AVX2 or baseline x86-64) and geometric_avx512.cpp (8 lanes, two pairs). Internal header.
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

constexpr arma::uword kBlock = 16;  // coordinates per step: four independent Horner chains
// z < kZSeries: u = I0(z) - 1 = y q(y), y = z^2/4 < 25 (kI0Series). z >= kZSeries: g(z) (kI0Scaled).
constexpr double kZSeries = 10.0;

struct GeomConstants {
  arma::uword d, dp;
  double neg_log_p, scale, scale_m2, scale_p2;
};

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

// Lane policy of geometric_pairs: 4 lanes of GCC's vector extension, one pair (AVX2 + FMA, or two SSE2 registers).
struct Lanes4 {
  static constexpr int kPairs = 1;
  using V = double __attribute__((vector_size(4 * sizeof(double))));
  using I = long long __attribute__((vector_size(4 * sizeof(double))));
  using M = I;  // a lane mask is -1 or 0
  static V load_x(const double* const* x, arma::uword l) {
    V v;
    std::memcpy(&v, x[0] + l, sizeof v);
    return v;
  }
  static V load_y(const double* y, arma::uword l) {
    V v;
    std::memcpy(&v, y + l, sizeof v);
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
  static bool any_of_pair(M m, int) { return any(m); }
};

// A block's two Horner chains in geometric_pairs, independent, so a block needing both runs them in one loop (eight
// chains, bound by throughput rather than by the latency of four): s the I0 series in y4 = z^2 / 4 (small z), g the
// scaled I0 polynomial in v = 20 / zz - 1, zz = z where z is mid-range and a harmless value in the other lanes.
template <class Lanes, class V = typename Lanes::V, class M = typename Lanes::M>
inline __attribute__((always_inline)) void horner_chains(bool has_small, bool has_mid, const V* z, const M* mid,
                                                         const V* y4, V* s, V* g, V* zz) {
  const V zero = {};
  V v[4];
  for (int b = 0; b < 4; ++b) {
    s[b] = zero + kI0Series[16];
    g[b] = zero + kI0Scaled[20];
    zz[b] = Lanes::sel(mid[b], z[b], zero + kZSeries);
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
}

// The end of a group of 64 coordinates of geometric_pairs: its lanes' products of (1 + u) series terms (pm), scaled
// I0's (pg) and significands (pz) folded into each pair's logs (log1p where the product is small) and big terms.
template <int NP, class V>
inline __attribute__((always_inline)) void fold_group(const V& pm, const V& pg, const V& pz, const bool* group_mid,
                                                      double* logs, double* big) {
  for (int p = 0; p < NP; ++p) {
    const int o = 4 * p;
    const double p01 = pm[o] + pm[o + 1] + pm[o] * pm[o + 1], p23 = pm[o + 2] + pm[o + 3] + pm[o + 2] * pm[o + 3];
    const double P = p01 + p23 + p01 * p23;
    const double G = group_mid[p] ? (pg[o] * pg[o + 1]) * (pg[o + 2] * pg[o + 3]) : 1.0;
    const double Z = group_mid[p] ? (pz[o] * pz[o + 1]) * (pz[o + 2] * pz[o + 3]) : 1.0;
    if (P >= 1.0) {
      // log1p(P) is only needed for small P; here 1 + P rounds with relative error eps, and one log takes all
      // three products (1 + P < 1e221, G in [6e-27, 1], Z in [1, 2^64]).
      logs[p] += std::log((1.0 + P) * G / std::sqrt(Z));
    } else {
      logs[p] += std::log1p(P);
      if (group_mid[p]) big[p] += std::log(G) - 0.5 * std::log(Z);
    }
  }
}

// Each pair's sum at the end of geometric_pairs: the log I0 of coordinates whose z overflowed, the significands'
// exponents (esum, times ln 2), the lanes' linear terms and the groups' logs, clamped at 0 (the sum is >= 0).
template <int NP, class V, class I>
inline __attribute__((always_inline)) void finish_pairs(const GeomConstants& c, const double* const* x, const double* y,
                                                        const V& lin, const I& esum, const bool* any_huge,
                                                        const double* logs, double* big, double* out) {
  const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;  // ln2_hi e exact
  for (int p = 0; p < NP; ++p) {
    const int o = 4 * p;
    if (any_huge[p]) {
      for (arma::uword l = 0; l < c.d; ++l) {
        const double z = c.scale * std::abs(x[p][l] * y[l]);
        if (!(z <= DBL_MAX)) big[p] += log_bessel_i0(z);
      }
    }
    const double e = static_cast<double>((esum[o] + esum[o + 1]) + (esum[o + 2] + esum[o + 3]));
    big[p] -= 0.5 * (e * ln2_hi + e * ln2_lo);
    const double lsum = (lin[o] + lin[o + 1]) + (lin[o + 2] + lin[o + 3]);
    out[p] = std::max(lsum + big[p] + logs[p], 0.0);
  }
}

// NP pairs (x[p], y) at once in vectors of 4 NP lanes: lanes 4p..4p+3 are pair p's four chains. A lane's operations
// do not depend on NP: a block runs the series or the g polynomial when any pair needs it, and a lane that does not
// need it adds an exact 0 (u = 0) or multiplies by an exact 1, so every lane policy gives the same bits (test
// DiscreteClosedForm.GeometricSumsTwoPairsPerVectorGiveTheSameBits). Two pairs fill AVX-512's 8 lanes (issue #19).
template <class Lanes>
inline __attribute__((always_inline)) void geometric_pairs(const GeomConstants& c, const double* const* x,
                                                           const double* y, double* out) {
  constexpr int NP = Lanes::kPairs, W = 4 * NP;
  using V = typename Lanes::V;
  using I = typename Lanes::I;
  using M = typename Lanes::M;
  V lane;
  for (int k = 0; k < W; ++k) lane[k] = k % 4;
  const V zero = {}, one = zero + 1;
  const I izero = {}, abs_mask = izero + 0x7fffffffffffffffLL, significand = izero + 0x000fffffffffffffLL,
          exponent_zero = izero + 0x3ff0000000000000LL;
  V lin = zero;  // lane 4p + k: pair p's coordinates l = k mod 4, in order
  I esum = izero;
  double logs[NP] = {}, big[NP] = {};
  bool any_huge[NP] = {};
  for (arma::uword l0 = 0; l0 < c.dp; l0 += 64) {
    const arma::uword l1 = std::min(c.dp, l0 + 64);
    V pm = zero, pg = one, pz = one;
    bool group_mid[NP] = {};
    for (arma::uword l = l0; l < l1; l += kBlock) {
      V t[4], z[4], y4[4];
      M mid[4], small_any = Lanes::none(), mid_any = Lanes::none();
      for (int b = 0; b < 4; ++b) {
        t[b] = Lanes::load_x(x, l + 4 * b) * Lanes::load_y(y, l + 4 * b);
        const V at = (V)((I)t[b] & abs_mask);
        z[b] = c.scale * at;
        const M small = Lanes::lt(z[b], zero + kZSeries);
        mid[b] = Lanes::both(Lanes::ge(z[b], zero + kZSeries), Lanes::le(z[b], zero + DBL_MAX));
        const M huge = Lanes::neither(small, mid[b]);  // NaN or inf
        for (int p = 0; p < NP; ++p) any_huge[p] |= Lanes::any_of_pair(huge, p);
        small_any = Lanes::either(small_any, small);
        mid_any = Lanes::either(mid_any, mid[b]);
        const M valid = Lanes::lt(lane + static_cast<double>(l + 4 * b), zero + static_cast<double>(c.d));
        lin += Lanes::sel(
            valid,
            c.neg_log_p + Lanes::sel(mid[b],
                                     at * Lanes::sel(Lanes::ge(t[b], zero), zero + c.scale_m2, zero + c.scale_p2),
                                     -2.0 * t[b]),
            zero);
        y4[b] = Lanes::sel(small, 0.25 * z[b] * z[b], zero);  // 0: the series gives I0 = 1 (log 1 = 0)
      }
      const bool has_small = Lanes::any(small_any), has_mid = Lanes::any(mid_any);
      V s[4], g[4], zz[4];
      horner_chains<Lanes>(has_small, has_mid, z, mid, y4, s, g, zz);
      if (has_small) {
        for (int b = 0; b < 4; ++b) {
          const V u = y4[b] * s[b];
          pm += u + pm * u;
        }
      }
      if (has_mid) {
        for (int p = 0; p < NP; ++p) group_mid[p] |= Lanes::any_of_pair(mid_any, p);
        for (int b = 0; b < 4; ++b) {
          const I bits = (I)zz[b];
          pg *= Lanes::sel(mid[b], g[b], one);
          pz *= Lanes::sel(mid[b], (V)((bits & significand) | exponent_zero), one);
          esum += Lanes::sel(mid[b], (bits >> 52) - 1023, izero);
        }
      }
    }
    fold_group<NP>(pm, pg, pz, group_mid, logs, big);
  }
  finish_pairs<NP>(c, x, y, lin, esum, any_huge, logs, big, out);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KESTREL_GEOMETRIC_AVX512 1
// Two pairs at a time in AVX-512's 8 lanes (geometric_avx512.cpp; call only when simd::active() is AVX-512).
void geometric_sums8(const GeomConstants& c, const double* xs, const double* ys, arma::mat& out);
#endif

}  // namespace kestrel::geometric_detail

#pragma GCC diagnostic pop
