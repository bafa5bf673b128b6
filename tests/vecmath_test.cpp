// The array transcendentals of core/vecmath.hpp on every SIMD path this CPU has, against <cmath> and 50-digit
// references, and the Gram-form pairwise sums (kernels/kernel.hpp, PoisRF) against direct sums.
#include <gtest/gtest.h>

#include <bit>
#include <boost/multiprecision/cpp_bin_float.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/logmath.hpp"
#include "core/rng.hpp"
#include "core/vecmath.hpp"
#include "estimators/discrete/discrete.hpp"
#include "estimators/trig/trig_real.hpp"
#include "kernels/kernel.hpp"

using namespace kestrel;
using big = boost::multiprecision::cpp_bin_float_50;

namespace {

// Runs body once per SIMD path the CPU supports and restores the active one.
template <typename Body>
void for_each_isa(Body&& body) {
  const simd::Isa saved = simd::active();
  for (simd::Isa isa : {simd::Isa::Scalar, simd::Isa::Avx2, simd::Isa::Avx512}) {
    if (!simd::supported(isa)) continue;
    simd::set_active(isa);
    SCOPED_TRACE(simd::name(isa));
    body();
  }
  simd::set_active(saved);
}

double ulps(double got, double want) {
  if (got == want) return 0;
  return std::abs(got - want) / (std::abs(want) * std::numeric_limits<double>::epsilon());
}

}  // namespace

TEST(VecMath, ElementaryFunctionsWithinFourUlp) {
  // libmvec documents at most 4 ulp; std:: (glibc) is within 1 ulp, hence 5 against std::.
  using Fn = void (*)(double*, std::size_t);
  struct Case {
    const char* name;
    Fn f;
    double (*ref)(double);
    double (*arg)(double u);  // argument from u uniform in [0, 1)
  };
  const Case cases[] = {
      {"exp", simd::exp, [](double v) { return std::exp(v); }, [](double u) { return -700 + 1400 * u; }},
      {"expm1", simd::expm1, [](double v) { return std::expm1(v); }, [](double u) { return -40 + 740 * u; }},
      {"log", simd::log, [](double v) { return std::log(v); }, [](double u) { return std::exp(-690 + 1380 * u); }},
      {"log1p", simd::log1p, [](double v) { return std::log1p(v); },
       [](double u) { return -1 + std::exp(-30 + 50 * u); }},
      {"sin", simd::sin, [](double v) { return std::sin(v); }, [](double u) { return -300 + 600 * u; }},
      {"cos", simd::cos, [](double v) { return std::cos(v); }, [](double u) { return -300 + 600 * u; }}};
  for_each_isa([&] {
    for (const Case& c : cases) {
      Rng rng(7);
      std::vector<double> in(4001);  // 4001: also exercises the padded tail
      for (double& v : in) v = c.arg(rng.uniform());
      std::vector<double> out = in;
      c.f(out.data(), out.size());
      double worst = 0;
      for (std::size_t k = 0; k < in.size(); ++k) worst = std::max(worst, ulps(out[k], c.ref(in[k])));
      EXPECT_LE(worst, 5.0) << c.name;
    }
  });
}

TEST(VecMath, Atan2WithinFourUlpOfLibm) {
  // The angular hybrid's angles: atan2(|u - v|, |u + v|) with both arguments >= 0, and the signs and zeros besides.
  const double inf = std::numeric_limits<double>::infinity();
  for_each_isa([&] {
    Rng rng(9);
    std::vector<double> y(4001), x(4001);
    for (std::size_t k = 0; k < y.size(); ++k) {
      y[k] = std::exp(-30 + 32 * rng.uniform()) * (k % 3 == 0 ? -1 : 1);
      x[k] = std::exp(-30 + 32 * rng.uniform()) * (k % 5 == 0 ? -1 : 1);
    }
    std::vector<double> a = y;
    simd::atan2(a.data(), x.data(), a.size());
    double worst = 0;
    for (std::size_t k = 0; k < y.size(); ++k) worst = std::max(worst, ulps(a[k], std::atan2(y[k], x[k])));
    EXPECT_LE(worst, 5.0);
    double p[5] = {0.0, 1.0, 0.0, 1.0, inf}, q[5] = {1.0, 0.0, 0.0, -inf, inf};
    simd::atan2(p, q, 5);
    EXPECT_EQ(p[0], 0.0);
    EXPECT_NEAR(p[1], M_PI / 2, 1e-15);
    EXPECT_EQ(p[2], 0.0);
    EXPECT_NEAR(p[3], M_PI, 1e-15);
    EXPECT_NEAR(p[4], M_PI / 4, 1e-15);
  });
}

TEST(VecMath, SpecialValuesAndPositionIndependence) {
  const double inf = std::numeric_limits<double>::infinity();
  for_each_isa([&] {
    double e[5] = {0.0, -inf, inf, 800.0, -800.0};
    simd::exp(e, 5);
    EXPECT_EQ(e[0], 1.0);
    EXPECT_EQ(e[1], 0.0);
    EXPECT_EQ(e[2], inf);
    EXPECT_EQ(e[3], inf);
    EXPECT_EQ(e[4], 0.0);
    double l[4] = {0.0, 1.0, inf, -1.0};
    simd::log(l, 4);
    EXPECT_EQ(l[0], -inf);
    EXPECT_EQ(l[1], 0.0);
    EXPECT_EQ(l[2], inf);
    EXPECT_TRUE(std::isnan(l[3]));
    // The same value gives the same result in the vector body and in the padded tail (any length).
    std::vector<double> v(13, 0.123456789);
    simd::exp(v.data(), v.size());
    for (double r : v) EXPECT_EQ(r, v[0]);
  });
}

// The AVX-512 exp writes 0 for lanes below -746 itself instead of letting libmvec send them to libm's underflow handler
// (issue #19): the results must be the ones libm gives, 0 below the subnormal range, the subnormals themselves
// unchanged, also for a vector mixing both and for NaN.
TEST(VecMath, ExpUnderflowLanesMatchLibm) {
  const double inf = std::numeric_limits<double>::infinity();
  for_each_isa([&] {
    std::vector<double> x = {-1e308, -inf,   -800.0, -746.5, -746.0, -745.2, -745.1, -744.0,
                             -740.0, -708.5, -1.0,   0.5,    -750.0, -3.0,   2.0,    -745.13};
    std::vector<double> e = x;
    simd::exp(e.data(), e.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      SCOPED_TRACE(x[i]);
      const double ref = std::exp(x[i]);
      if (ref == 0.0 || ref < std::numeric_limits<double>::min())
        EXPECT_EQ(e[i], ref);  // exact 0 and subnormals (libmvec falls back to libm for them)
      else
        EXPECT_LE(ulps(e[i], ref), 4.0);
    }
    double n[8] = {std::nan(""), -800.0, 0, 0, 0, 0, 0, 0};
    simd::exp(n, 8);
    EXPECT_TRUE(std::isnan(n[0]));
    EXPECT_EQ(n[1], 0.0);
  });
}

// simd::exp_libm must give std::exp's bits on every path (it replaces std::exp where an ulp could move an argmax).
// On AVX-512 it evaluates glibc's algorithm itself, which equals the library's only where glibc runs its FMA variant,
// as it does on every CPU with AVX-512 (glibc >= 2.28); a glibc with another exp would fail here, as it should.
TEST(VecMath, ExpLibmIsStdExpBitForBit) {
  const double inf = std::numeric_limits<double>::infinity(), tiny = 0x1p-54;
  std::vector<double> x = {0.0,
                           -0.0,
                           4.9e-324,
                           -4.9e-324,
                           tiny,
                           -tiny,
                           std::nextafter(tiny, 0.0),
                           -std::nextafter(tiny, 0.0),
                           512.0,
                           -512.0,
                           std::nextafter(-512.0, 0.0),
                           std::nextafter(-512.0, -inf),
                           1024.0,
                           -1024.0,
                           std::nextafter(-1024.0, 0.0),
                           -745.1332191019412,
                           -745.1332191019411,
                           -708.3964185322641,
                           -708.4,
                           709.782712893384,
                           709.79,
                           600.0,
                           -1e308,
                           1e308,
                           std::nan(""),
                           -std::nan(""),
                           inf,
                           -inf};
  Rng rng(11);
  for (int k = 0; k < 1'000'000; ++k) x.push_back(-1100 + 1820 * rng.uniform());
  for (int k = 0; k < 200'000; ++k) x.push_back(-760 + 260 * rng.uniform());  // the subnormal special case
  for (int k = 0; k < 50'000; ++k) x.push_back((2 * rng.uniform() - 1) * 0x1p-50);
  for (int k = 0; k < 50'000; ++k) {  // random bit patterns: every exponent, NaNs included
    const std::uint64_t b =
        static_cast<std::uint64_t>(rng.uniform() * 0x1p32) << 32 | static_cast<std::uint64_t>(rng.uniform() * 0x1p32);
    x.push_back(std::bit_cast<double>(b));
  }
  for_each_isa([&] {
    std::vector<double> e = x;
    simd::exp_libm(e.data(), e.size());
    std::size_t differ = 0, first = x.size();
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double want = std::exp(x[i]);
      const bool same = std::isnan(want) ? std::isnan(e[i])
                                         : std::bit_cast<std::uint64_t>(e[i]) == std::bit_cast<std::uint64_t>(want);
      if (!same && differ++ == 0) first = i;
    }
    EXPECT_EQ(differ, 0u) << "first at x = " << (first < x.size() ? x[first] : 0.0);
  });
}

TEST(VecMath, VarianceTransformsMatchReferences) {
  const double inf = std::numeric_limits<double>::infinity();
  for_each_isa([&] {
    std::vector<double> x = {1e-300, 1e-15, 1e-8, 1e-3, 0.5, 0.6931, 0.6932, 1.0, 29.0, 31.0, 300.0, 1e5};
    std::vector<double> a = x, b = x, c = x;
    simd::log_expm1(a.data(), a.size());
    simd::log_cosh_minus_one(b.data(), b.size());
    simd::log_trig_real(c.data(), c.size());
    for (std::size_t k = 0; k < x.size(); ++k) {
      const big X(x[k]);
      const double tol_a = 1e-14 * std::max(1.0, std::abs(a[k]));
      if (x[k] < 700) {
        EXPECT_NEAR(a[k], static_cast<double>(log(expm1(X))), tol_a) << x[k];
        const big sh = sinh(X / 2);  // cosh x - 1 = 2 sinh^2(x/2), without the cancellation at tiny x
        EXPECT_NEAR(b[k], static_cast<double>(log(2 * sh * sh)), 1e-14 * std::max(1.0, std::abs(b[k]))) << x[k];
      }
      EXPECT_NEAR(a[k], log_expm1(x[k]), tol_a) << x[k];
      EXPECT_NEAR(b[k], log_cosh_minus_one(x[k]), 1e-14 * std::max(1.0, std::abs(b[k]))) << x[k];
      EXPECT_NEAR(c[k], trig_real_log_var_over_k2(x[k]), 1e-14 * std::max(1.0, std::abs(c[k]))) << x[k];
    }
    double z[4] = {0.0, -1.0, std::nan(""), -0.0};
    simd::log_expm1(z, 4);
    EXPECT_EQ(z[0], -inf);  // Var = 0: exact pair
    EXPECT_EQ(z[1], -inf);
    EXPECT_TRUE(std::isnan(z[2]));  // a NaN is never turned into an exact pair
    double h[2] = {0.0, -0.0};
    simd::log_cosh_minus_one(h, 2);
    EXPECT_EQ(h[0], -inf);
    EXPECT_EQ(h[1], -inf);
  });
}

TEST(GramForm, SquaredNormSumsMatchDirectSumsAndCancelExactly) {
  Rng rng(3);
  const arma::uword d = 64;
  arma::mat X(d, 40), Y(d, 30);
  for (double& v : X) v = rng.normal();
  for (double& v : Y) v = 3 * rng.normal();
  Y.col(4) = X.col(7);         // |x - y|^2 = 0 exactly for s = -1
  Y.col(5) = X.col(8) + 1e-9;  // nearly cancelling: must come from the direct sum
  for (double s : {1.0, -1.0, 0.5}) {
    const arma::mat G = pairwise_sq_norm_sum(X, Y, s);
    for (arma::uword j = 0; j < Y.n_cols; ++j)
      for (arma::uword i = 0; i < X.n_cols; ++i) {
        const double direct = arma::accu(arma::square(X.col(i) + s * Y.col(j)));
        // Bound of recompute_cancelling: 64 d eps relative.
        EXPECT_NEAR(G(i, j), direct, 64 * d * 2.3e-16 * direct) << s << " " << i << " " << j;
      }
  }
  const arma::mat G = pairwise_sq_norm_sum(X, Y, -1.0);
  EXPECT_EQ(G(7, 4), 0.0);
  // ~6e-17 against |x|^2 + |y|^2 ~ 260: the Gram form alone would be off by ~1e-14, a hundred times the value.
  const double direct = arma::accu(arma::square(X.col(8) - Y.col(5)));
  EXPECT_GT(direct, 0.0);
  EXPECT_NEAR(G(8, 5), direct, 1e-12 * direct);
}

TEST(GramForm, PoissonSumsMatchPerCoordinateSums) {
  // PoisRF's H = sum_l h(x_l y_l) by two BLAS products against the per-coordinate definition (discrete.hpp), including
  // a pair with x_l y_l ~ lambda for all l, where the Gram form cancels and the direct sum takes over.
  Rng rng(5);
  const arma::uword d = 16;
  const DiscreteParams q{DiscreteKind::Poisson, 1.5, 0.5};
  arma::mat X(d, 12), Y(d, 9);
  for (double& v : X) v = 2 * rng.normal();
  for (double& v : Y) v = 2 * rng.normal();
  for (arma::uword l = 0; l < d; ++l) Y(l, 2) = q.lambda / X(l, 3) * (1 + 1e-6 * rng.normal());
  const DiscreteEstimator e("pois", d, q, std::nullopt);
  const arma::mat lv = e.log_var_over_k2(X, Y);
  for (arma::uword j = 0; j < Y.n_cols; ++j)
    for (arma::uword i = 0; i < X.n_cols; ++i) {
      double H = 0;
      for (arma::uword l = 0; l < d; ++l) H += discrete_coord_log_m2(q, X(l, i) * Y(l, j));
      // d log(e^H - 1) / dH = e^H / (e^H - 1): a relative error r in H moves the log by r max(1, H).
      EXPECT_NEAR(lv(i, j), discrete_log_var_from_sum(H), 64 * d * 2.3e-16 * std::max(1.0, H)) << i << " " << j;
    }
  EXPECT_LT(lv(3, 2), -20);  // the near-exact pair really is tiny, and accurate
}

// The single-precision helpers of the long-context key sums (analysis/nested_attention.cpp): add_max adds exactly as
// float addition does and returns the largest sum; exp_shifted is within 4 ulp of exp(x - shift) (the float
// difference, evaluated in double), 0 for -inf and below -87 (no subnormal results), and the same in the vector body
// and the padded tail.
TEST(VecMath, RowMaxIsArmadillosRowMaximum) {
  // The clone this CPU picks against arma::max(P, 1): sizes around the vector widths, -inf entries
  // and whole -inf rows, and no columns at all (-inf).
  Rng rng(41);
  for (const auto& [r, c] :
       std::vector<std::pair<arma::uword, arma::uword>>{{1, 1}, {7, 3}, {8, 5}, {17, 33}, {64, 2}}) {
    arma::mat P = 50.0 * rng.normal_matrix(r, c);
    P(0, 0) = -HUGE_VAL;
    if (r > 3) P.row(3).fill(-HUGE_VAL);
    const arma::vec want = arma::max(P, 1);
    const arma::vec got = simd::row_max(P);
    EXPECT_EQ(arma::accu(got != want), 0u) << r << " x " << c;
  }
  EXPECT_TRUE(arma::all(simd::row_max(arma::mat(4, 0)) == -HUGE_VAL));
}

TEST(VecMath, SinglePrecisionAddMaxAndShiftedExp) {
  for_each_isa([&] {
    Rng rng(7, Stream::User, 0);
    const std::size_t n = 37;  // two AVX-512 vectors and a tail
    std::vector<float> x(n), a(n);
    for (std::size_t i = 0; i < n; ++i) {
      x[i] = static_cast<float>(-120 + 130 * rng.uniform());
      a[i] = static_cast<float>(-2 + 4 * rng.uniform());
    }
    std::vector<float> s = x;
    const float top = simd::add_max(s.data(), a.data(), n);
    float want_top = -HUGE_VALF;
    for (std::size_t i = 0; i < n; ++i) {
      EXPECT_EQ(s[i], x[i] + a[i]);
      want_top = std::max(want_top, x[i] + a[i]);
    }
    EXPECT_EQ(top, want_top);
    const float shift = 3.5f;
    std::vector<float> e = s;
    simd::exp_shifted(e.data(), n, shift);
    for (std::size_t i = 0; i < n; ++i) {
      const float v = s[i] - shift;
      const double ref = std::exp(static_cast<double>(v));
      SCOPED_TRACE(v);
      if (v < -87.0f)
        EXPECT_EQ(e[i], 0.0f);
      else
        EXPECT_LE(std::abs(e[i] - ref), 4 * std::ldexp(ref, -23));
      EXPECT_TRUE(e[i] == 0.0f || e[i] >= std::numeric_limits<float>::min());
    }
    float special[3] = {-HUGE_VALF, 0.0f, -200.0f};
    simd::exp_shifted(special, 3, 0.0f);
    EXPECT_EQ(special[0], 0.0f);
    EXPECT_EQ(special[1], 1.0f);
    EXPECT_EQ(special[2], 0.0f);
    std::vector<float> same(19, 0.123456f);
    simd::exp_shifted(same.data(), same.size(), -1.0f);
    for (float r : same) EXPECT_EQ(r, same[0]);
  });
}
