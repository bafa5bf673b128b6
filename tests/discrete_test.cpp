// Discretely-induced RFs (CRT 3.2: PoisRF, GeomRF, PoisRF+, GeomRF+): exact variance against Monte Carlo, closed forms
// against 50-digit references, the lambda* / Brent p fits, the shift of the positive variants, bad input and a stress
// run. Monte Carlo threshold: |empirical - exact| < 4.5 standard errors (test_util.hpp); each test states its number
// of checks and the union-bound false-failure rate (normal approximation, 6.8e-6 per check).
#include <gtest/gtest.h>

#include <cmath>

#include <boost/multiprecision/cpp_bin_float.hpp>

#include "analysis/montecarlo.hpp"
#include "core/error.hpp"
#include "core/logmath.hpp"
#include "core/rng.hpp"
#include "core/vecmath.hpp"
#include "data/regimes.hpp"
#include "estimators/discrete/discrete.hpp"
#include "estimators/discrete/geometric_kernel.hpp"
#include "estimators/registry.hpp"
#include "test_util.hpp"

// The GeomRF kernel's vectors are passed by value between its inline functions (GCC warns at the file's end).
#pragma GCC diagnostic ignored "-Wpsabi"

using namespace kestrel;
using big = boost::multiprecision::cpp_bin_float_50;

namespace {

const DiscreteParams kPois07{DiscreteKind::Poisson, 0.7, 0.5};
const DiscreteParams kGeom03{DiscreteKind::Geometric, 1.0, 0.3};

// The four registered families fitted on (X, Y) plus two fixed-parameter estimators away from the fitted optimum.
std::vector<std::unique_ptr<Estimator>> all_cases(const arma::mat& X, const arma::mat& Y) {
  std::vector<std::unique_ptr<Estimator>> v;
  for (const char* n : {"pois", "geom", "pois+", "geom+"}) v.push_back(make_estimator(n, X, Y));
  v.push_back(std::make_unique<DiscreteEstimator>("pois-0.7", X.n_rows, kPois07));
  v.push_back(std::make_unique<DiscreteEstimator>("geom-0.3", X.n_rows, kGeom03));
  return v;
}

// Small inputs with entries of magnitude ~0.3-0.6, one exact zero (0^0 = 1 path) and mixed signs.
std::pair<arma::mat, arma::mat> small_sets() {
  arma::mat X = test::points(3, 3, 0.45, 31), Y = test::points(3, 3, 0.45, 32);
  X(1, 0) = 0.0;
  return {X, Y};
}

// 50-digit references.
big big_log_i0(const big& z) {
  const big y = z * z / 4;
  big term = 1, sum = 1;
  for (int k = 1; k < 1000000; ++k) {
    term *= y / (big(k) * k);
    sum += term;
    if (term < sum * big("1e-55")) break;
  }
  return log(sum);
}

big big_log_m2_sum(const DiscreteParams& q, const arma::vec& x, const arma::vec& y) {
  big H = 0;
  for (arma::uword l = 0; l < x.n_elem; ++l) {
    const big t = big(x(l)) * big(y(l));
    if (q.kind == DiscreteKind::Poisson) {
      H += big(q.lambda) + t * t / big(q.lambda) - 2 * t;  // CRT eq. 11 / K^2, per coordinate
    } else {
      const big one_minus_p = 1 - big(q.p);
      H += -log(big(q.p)) + big_log_i0(2 * abs(t) / sqrt(one_minus_p)) - 2 * t;  // CRT eq. 13 / K^2
    }
  }
  return H;
}

double ref_log_var(const DiscreteParams& q, const arma::vec& x, const arma::vec& y) {
  const big H = big_log_m2_sum(q, x, y);
  return static_cast<double>(log(exp(H) - 1));
}

double one_pair(const Estimator& e, const arma::vec& x, const arma::vec& y) {
  return e.log_var_over_k2(arma::mat(x), arma::mat(y))(0, 0);
}

}  // namespace

TEST(DiscreteMonteCarlo, ExactVarianceMatchesSimulationSoftmax) {
  // 6 estimators x 9 entries x 2 checks (mean, variance) = 108 checks at 4.5 se: false-failure rate <= 7.4e-4.
  const auto [X, Y] = small_sets();
  for (const auto& e : all_cases(X, Y)) {
    const MonteCarloResult r = simulate(*e, Kernel::softmax(), X, Y, {20000, 1, 201, Sampler::Iid});
    test::expect_moments(*e, Kernel::softmax(), X, Y, r);
  }
}

TEST(DiscreteMonteCarlo, ExactVarianceMatchesSimulationGaussianKernelAndMFeatures) {
  // Gaussian kernel (alpha = -1/2) and M = 4 features (Var_M = Var_1 / M); Y shifted so x^T y is not centred.
  // 6 estimators x 6 entries x 2 checks = 72 checks at 4.5 se: false-failure rate <= 4.9e-4.
  const arma::mat X = test::points(3, 2, 0.4, 33), Y = test::points(3, 3, 0.4, 34) + 0.2;
  for (const auto& e : all_cases(X, Y)) {
    const MonteCarloResult r = simulate(*e, Kernel::gaussian(), X, Y, {10000, 4, 202, Sampler::Iid});
    test::expect_moments(*e, Kernel::gaussian(), X, Y, r);
  }
}

TEST(DiscreteMonteCarlo, VarianceCheckHasPowerAgainstA25PercentError) {
  // Negative control: the same threshold rejects a variance 25% off on most of the 9 entries.
  const auto [X, Y] = small_sets();
  for (const char* n : {"pois", "geom", "geom+"}) {
    const auto e = make_estimator(n, X, Y);
    const MonteCarloResult r = simulate(*e, Kernel::softmax(), X, Y, {20000, 1, 201, Sampler::Iid});
    const arma::mat wrong = 1.25 * arma::exp(log_variance(*e, Kernel::softmax(), X, Y));
    const arma::mat z = arma::abs(r.kernel.variance - wrong) / r.kernel.se_variance;
    EXPECT_GE(arma::accu(z > test::kSigmas), 5u) << n << ": z = " << z.t();
  }
}

TEST(DiscreteMonteCarlo, ClampedInputsOfPlusVariantsAreBiasedAsDocumented) {
  // Fit pois+ / geom+ on (X, Y), then evaluate new queries with coordinates below the shift c (clamped to epsilon).
  // Expected mean K exp((|x-y|^2 - |x_hat-y_hat|^2)/2), with x_hat computed here from c; exact variance from
  // log_var_over_k2. 2 estimators x 6 entries x 2 checks = 24 checks at 4.5 se: false-failure rate <= 1.7e-4.
  // Power: the unbiased target K must be rejected on the clamped entries (bias factor >= e^0.1).
  const arma::mat X = test::points(3, 3, 0.3, 35), Y = test::points(3, 3, 0.3, 36);
  for (const char* n : {"pois+", "geom+"}) {
    const auto e = make_estimator(n, X, Y);
    const auto* de = dynamic_cast<const DiscreteEstimator*>(e.get());
    ASSERT_NE(de, nullptr);
    ASSERT_TRUE(de->shift().has_value());
    const arma::vec c = de->shift()->c;
    const double eps = de->shift()->epsilon;
    EXPECT_EQ(eps, 1e-8);
    arma::mat Xn = X.cols(0, 1);
    Xn(0, 0) = c(0) - 0.5;  // clamped in coordinate 0
    Xn(2, 1) = c(2) - 0.3;  // clamped in coordinate 2
    arma::mat Xh = Xn, Yh = Y;
    for (arma::uword i = 0; i < Xh.n_elem; ++i) Xh(i) = std::max(Xn(i) - c(i % 3), eps);
    for (arma::uword i = 0; i < Yh.n_elem; ++i) Yh(i) = std::max(Y(i) - c(i % 3), eps);
    arma::mat expected(2, 3);
    for (arma::uword i = 0; i < 2; ++i)
      for (arma::uword j = 0; j < 3; ++j) {
        const double dxy = arma::accu(arma::square(Xn.col(i) - Y.col(j)));
        const double dh = arma::accu(arma::square(Xh.col(i) - Yh.col(j)));
        expected(i, j) = std::exp(arma::dot(Xn.col(i), Y.col(j)) + 0.5 * (dxy - dh));
      }
    const MonteCarloResult r = simulate(*e, Kernel::softmax(), Xn, Y, {20000, 1, 203, Sampler::Iid});
    test::expect_moments(*e, Kernel::softmax(), Xn, Y, r, 1.0, &expected);
    int rejected = 0;
    for (arma::uword i = 0; i < 6; ++i)
      rejected += std::abs(r.kernel.mean(i) - r.kernel.exact(i)) > test::kSigmas * r.kernel.se_mean(i);
    EXPECT_GE(rejected, 4) << n << ": the bias of clamped inputs should be detectable";
  }
}

TEST(DiscreteMonteCarlo, PlusVariantsArePositiveOthersMayBeNegative) {
  const auto [X, Y] = small_sets();
  Rng rng(5);
  for (const char* n : {"pois+", "geom+"}) {
    const auto e = make_estimator(n, X, Y);
    EXPECT_TRUE(e->info().positive);
    const Draw w = e->draw(200, rng, Sampler::Iid);
    EXPECT_GT(e->features(w, X, Side::Query).min(), 0.0) << n;
  }
  for (const char* n : {"pois", "geom"}) {
    const auto e = make_estimator(n, X, Y);
    EXPECT_FALSE(e->info().positive);
    const Draw w = e->draw(200, rng, Sampler::Iid);
    const arma::mat F = e->features(w, X, Side::Query);
    EXPECT_LT(F.min(), 0.0) << n;  // negative entries with odd counts
    EXPECT_TRUE(F.is_finite()) << n;
  }
}

TEST(DiscreteClosedForm, LogBesselI0MatchesReference) {
  for (double z : {0.0, 1e-8, 1e-3, 0.5, 1.999999, 2.0, 2.5, 4.0, 5.999999, 6.0, 10.0, 50.0, 700.0, 3000.0, 2e4}) {
    const double ref = static_cast<double>(big_log_i0(big(z)));
    EXPECT_NEAR(log_bessel_i0(z), ref, 1e-14 * std::max(1e-300, std::abs(ref)) + (z == 0 ? 0 : 1e-300)) << "z=" << z;
  }
}

TEST(DiscreteClosedForm, LogVarianceMatches50DigitReference) {
  // Moderate, tiny (Var/K^2 ~ 1e-6) and huge (log Var/K^2 > 300) cases, relative error 1e-12.
  struct Case {
    DiscreteParams q;
    arma::vec x, y;
  };
  const std::vector<Case> cases = {
      {kPois07, {0.3, -0.5, 0.0}, {0.6, 0.4, -0.2}},
      {{DiscreteKind::Poisson, 0.25, 0.5}, {0.5, 0.5 + 1e-4, 1.0}, {0.5, 0.5, 0.25}},  // tiny: x_l y_l ~ lambda
      {{DiscreteKind::Poisson, 1.5, 0.5}, {6.0, -5.0, 4.0}, {5.0, 6.0, 3.0}},          // huge
      {kGeom03, {0.3, -0.5, 0.0}, {0.6, 0.4, -0.2}},
      {{DiscreteKind::Geometric, 1.0, 0.9}, {0.01, 0.02, 0.0}, {0.01, -0.01, 0.5}},         // small
      {{DiscreteKind::Geometric, 1.0, 0.5}, {9.0, -8.0, 7.0, 6.0}, {8.0, 9.0, 7.0, -6.0}},  // huge
      {{DiscreteKind::Geometric, 1.0, 1e-6}, {3.0, 3.0}, {3.0, 3.0}},                       // p near 0
      {{DiscreteKind::Geometric, 1.0, 1.0 - 1e-9}, {0.1, 0.2}, {0.1, -0.2}},                // p near 1
  };
  int n_huge = 0;
  for (const auto& c : cases) {
    const DiscreteEstimator e("t", c.x.n_elem, c.q);
    const double got = one_pair(e, c.x, c.y);
    const double ref = ref_log_var(c.q, c.x, c.y);
    EXPECT_TRUE(std::isfinite(got));
    EXPECT_NEAR(got, ref, 1e-12 * std::max(1.0, std::abs(ref))) << "lambda=" << c.q.lambda << " p=" << c.q.p;
    n_huge += ref > 300;
  }
  EXPECT_GE(n_huge, 2);  // the list really contains the e^300+ regime
}

TEST(DiscreteClosedForm, GeometricSphereRegimeSmallSigmaMatches50DigitReference) {
  // Issue #21: sphere regime, d = 64, sigma = 1e-5 (every |x_l y_l| ~ 2e-12, log(Var/K^2) ~ -22): H = sum_l h(x_l y_l)
  // is ~1e-10, and the log of the rounded product of the 64 factors I0(z_l) = 1 + O(1e-12) lost ~d eps ~ 1e-14
  // absolute, ~1e-4 in log(Var/K^2). Tolerance 1e-8 in the log (measured ~1e-13 with the product kept as prod - 1);
  // all 16 x 16 pairs, fitted p and a fixed p = 0.3 (H ~ d log(1/p), no cancellation).
  const SetPair sp = draw_regime({.name = "sphere", .dim = 64, .points = 16, .sigma = 1e-5, .seed = 2});
  const auto fitted = make_estimator("geom", sp.X, sp.Y);
  const DiscreteEstimator fixed("geom-0.3", 64, kGeom03);
  for (const Estimator* e : std::vector<const Estimator*>{fitted.get(), &fixed}) {
    const DiscreteParams q = dynamic_cast<const DiscreteEstimator&>(*e).discrete_params();
    const arma::mat lv = e->log_var_over_k2(sp.X, sp.Y);
    for (arma::uword j = 0; j < sp.Y.n_cols; ++j) {
      for (arma::uword i = 0; i < sp.X.n_cols; ++i) {
        const double ref = ref_log_var(q, sp.X.col(i), sp.Y.col(j));
        ASSERT_NEAR(lv(i, j), ref, 1e-8 * std::abs(ref)) << e->info().name << " p=" << q.p << " pair " << i << "," << j;
      }
    }
  }
  EXPECT_LT(fitted->log_var_over_k2(sp.X, sp.Y).max(), -20.0);  // really the tiny-variance regime
}

TEST(DiscreteClosedForm, GeometricBesselBranchesMatch50DigitReference) {
  // The vectorised log I0(z) of the pairwise sums is a series for z < 10 and a polynomial in 20/z for z >= 10: pairs
  // whose coordinates put z on both sides of the switch, far out (1e4) and mixed within a pair, t of both signs,
  // against the 50-digit reference; relative 1e-13 in log(Var/K^2) (measured: < 3e-16).
  const double scale = 2.0 / std::sqrt(1.0 - kGeom03.p);
  const std::vector<double> zs = {9.999999, 10.0, 10.000001, 12.5, 17.0, 19.999999, 20.0, 20.000001, 27.0, 60.0, 1e4};
  const DiscreteEstimator e("geom-0.3", 5, kGeom03);
  for (std::size_t k = 0; k < zs.size(); ++k) {
    arma::vec x(5), y(5);
    for (arma::uword l = 0; l < 5; ++l) {
      const double z = zs[(k + 3 * l) % zs.size()], r = std::sqrt(z / scale);
      x(l) = r;
      y(l) = l % 2 ? -r : r;  // t = x_l y_l = -+z / scale
    }
    const double ref = ref_log_var(kGeom03, x, y);
    EXPECT_NEAR(one_pair(e, x, y), ref, 1e-13 * std::max(1.0, std::abs(ref))) << "first z " << zs[k];
  }
}

TEST(DiscreteClosedForm, GeometricSumsGiveTheSameBitsAtEveryWidth) {
  // GeomRF's sums hold one pair per lane, 8 per vector on AVX-512 and 4 otherwise; each lane must do exactly what a
  // lane of the other width does: bit-identical H for unit-scale points (the series), shifted points (z >= 10), huge
  // and zero coordinates, d not a multiple of 8 and several 64-coordinate groups, row counts not a multiple of 8.
  if (!simd::supported(simd::Isa::Avx512)) GTEST_SKIP() << "this CPU has no AVX-512";
  const simd::Isa saved = simd::active();
  Rng rng(23);
  struct Case {
    arma::uword d, nx, ny;
    double offset, spread, p;
  };
  for (const Case& c : {Case{64, 21, 9, 0.0, 1.0, 0.86}, Case{37, 13, 6, 3.0, 0.5, 0.3}, Case{130, 7, 5, 0.0, 2.0, 0.6},
                        Case{16, 9, 4, 2.0, 1.5, 0.95}}) {
    arma::mat X(c.d, c.nx), Y(c.d, c.ny);
    for (double& v : X) v = c.offset + c.spread * rng.normal();
    for (double& v : Y) v = c.offset + c.spread * rng.normal();
    X(0, 1) = 1e200;  // x_l y_l overflows: z = inf
    X(3, 2) = 0.0;
    const DiscreteParams q{DiscreteKind::Geometric, 1.0, c.p};
    simd::set_active(simd::Isa::Avx512);
    const arma::mat wide = discrete_pairwise_sums(q, X, Y);
    simd::set_active(simd::Isa::Scalar);
    const arma::mat narrow = discrete_pairwise_sums(q, X, Y);
    simd::set_active(saved);
    ASSERT_TRUE(wide.is_finite());
    EXPECT_EQ(arma::accu(wide != narrow), 0u) << "d = " << c.d;
  }
}

TEST(DiscreteClosedForm, GeometricKernelLogsAreWithinTwoUlpOfTheLibm) {
  // The pairwise sums' own log and log1p (geometric_kernel.hpp: the same operations at every width) against std::log
  // and std::log1p over the ranges they are used on: log of [1e-40, 1e230] and log1p of [1e-300, 1), 4 lanes at a
  // time, relative error at most 2 eps (measured 1.0 and 1.4 eps). Deterministic inputs, no false failures.
  using L = geometric_detail::Lanes4;
  Rng rng(29);
  double worst_log = 0, worst_log1p = 0;
  for (int n = 0; n < 25000; ++n) {
    L::V x, P;
    for (int k = 0; k < 4; ++k) {
      x[k] = std::pow(10.0, -40.0 + 270.0 * rng.uniform());
      P[k] = n % 2 ? std::pow(10.0, -300.0 * rng.uniform()) : rng.uniform();
    }
    if (n == 0) x[0] = 1.0, x[1] = 0.5, x[2] = std::nextafter(1.0, 2.0), P[0] = 0.0, P[1] = 0.41421356237309503;
    const L::V lx = geometric_detail::log_lanes<L>(x), lp = geometric_detail::log1p_lanes<L>(P);
    for (int k = 0; k < 4; ++k) {
      const double a = std::log(x[k]), b = std::log1p(P[k]);
      if (a == 0)
        ASSERT_EQ(lx[k], 0.0);
      else
        worst_log = std::max(worst_log, std::abs(lx[k] - a) / std::abs(a));
      if (b == 0)
        ASSERT_EQ(lp[k], 0.0);
      else
        worst_log1p = std::max(worst_log1p, std::abs(lp[k] - b) / std::abs(b));
    }
  }
  EXPECT_LE(worst_log, 2 * DBL_EPSILON);
  EXPECT_LE(worst_log1p, 2 * DBL_EPSILON);
  RecordProperty("worst_log_ulp", std::to_string(worst_log / DBL_EPSILON));
  RecordProperty("worst_log1p_ulp", std::to_string(worst_log1p / DBL_EPSILON));
}

TEST(DiscreteClosedForm, PoissonExactWhenEveryProductEqualsLambda) {
  // f(x) f(y) = prod_l e^lambda (x_l y_l / lambda)^{w_l} is constant when x_l y_l = lambda: zero variance.
  const DiscreteEstimator e("t", 3, {DiscreteKind::Poisson, 0.5, 0.5});
  EXPECT_EQ(one_pair(e, {1.0, 0.5, 2.0}, {0.5, 1.0, 0.25}), -kInf);
}

TEST(DiscreteClosedForm, PlusVariantVarianceIsDirfVarianceAtShiftedPoints) {
  // For points of the fitting sets Var/K^2 of pois+ / geom+ is the plain DIRF's ratio at (x_hat, y_hat).
  const arma::mat X = test::points(4, 5, 1.0, 37), Y = test::points(4, 6, 1.0, 38);
  for (const char* n : {"pois+", "geom+"}) {
    const auto e = make_estimator(n, X, Y);
    const auto* de = dynamic_cast<const DiscreteEstimator*>(e.get());
    const DiscreteEstimator plain("plain", 4, de->discrete_params());
    const arma::mat a = e->log_var_over_k2(X, Y);
    const arma::mat b = plain.log_var_over_k2(shift_points(*de->shift(), X), shift_points(*de->shift(), Y));
    EXPECT_TRUE(arma::approx_equal(a, b, "reldiff", 1e-14)) << n;
  }
}

TEST(DiscreteFit, StatisticsEq12And14MatchBruteForce) {
  const arma::mat X = test::points(5, 40, 1.0, 41), Y = test::points(5, 30, 1.0, 42) + 0.5;
  const DiscreteStats st = discrete_stats(X, Y);
  double s12 = 0, xy = 0;
  arma::vec a(5, arma::fill::zeros);
  for (arma::uword i = 0; i < X.n_cols; ++i)
    for (arma::uword j = 0; j < Y.n_cols; ++j) {
      s12 += arma::accu(arma::square(X.col(i) % Y.col(j)));
      a += arma::abs(X.col(i) % Y.col(j));
      xy += arma::dot(X.col(i), Y.col(j));
    }
  const double n = static_cast<double>(X.n_cols * Y.n_cols);
  EXPECT_NEAR(st.mean_sum_sq_prod, s12 / n, 1e-12 * s12 / n);
  EXPECT_TRUE(arma::approx_equal(st.mean_abs_prod, a / n, "reldiff", 1e-12));
  EXPECT_NEAR(st.mean_xy, xy / n, 1e-12 * std::abs(xy / n) + 1e-14);
  EXPECT_EQ(st.d, 5u);
}

TEST(DiscreteFit, LambdaStarMinimisesTheMeanLogSecondMomentOverAGrid) {
  // For PoisRF the mean over all pairs of log(E[f1^2 f2^2]/K^2) is lambda d + S/lambda - 2 mean x^T y exactly:
  // evaluate that brute force over pairs (sum of (x_l y_l - lambda)^2 / lambda) on a grid of lambda.
  for (const char* regime : {"normal", "sphere", "heterogen"}) {
    for (double sigma : {0.25, 1.0}) {
      const SetPair sp = draw_regime({.name = regime, .dim = 8, .points = 30, .sigma = sigma, .seed = 4});
      const double ls = poisson_lambda_star(discrete_stats(sp.X, sp.Y));
      auto brute = [&](double lambda) {
        double s = 0;
        for (arma::uword i = 0; i < sp.X.n_cols; ++i)
          for (arma::uword j = 0; j < sp.Y.n_cols; ++j)
            s += arma::accu(arma::square(sp.X.col(i) % sp.Y.col(j) - lambda)) / lambda;
        return s / (sp.X.n_cols * sp.Y.n_cols);
      };
      const double best = brute(ls);
      EXPECT_NEAR(poisson_objective(ls, discrete_stats(sp.X, sp.Y)), best, 1e-10 * best);
      for (double r = 0.05; r < 20; r *= 1.01) EXPECT_GE(brute(ls * r), best - 1e-12 * best) << regime << sigma << r;
      // Strictly worse 1% away on either side (the minimum is not at the grid's edge).
      EXPECT_GT(brute(ls * 1.01), best);
      EXPECT_GT(brute(ls / 1.01), best);
    }
  }
}

TEST(DiscreteFit, BrentPIsNotImprovedByPerturbationsOrAGrid) {
  for (const char* regime : {"normal", "sphere", "heterogen"}) {
    for (double sigma : {0.05, 0.25, 1.0, 2.0}) {
      const SetPair sp = draw_regime({.name = regime, .dim = 16, .points = 64, .sigma = sigma, .seed = 3});
      for (bool plus : {false, true}) {
        arma::mat X = sp.X, Y = sp.Y;
        if (plus) {
          const ShiftParams s = fit_shift(X, Y);
          X = shift_points(s, X), Y = shift_points(s, Y);
        }
        const DiscreteStats st = discrete_stats(X, Y);
        const double p = fit_geometric_p(st);
        ASSERT_GT(p, 0.0);
        ASSERT_LT(p, 1.0);
        // Independent objective with std::cyl_bessel_i (moderate arguments only).
        double indep = -16.0 * std::log(p) - 2.0 * st.mean_xy;
        bool moderate = true;
        for (double a : st.mean_abs_prod) {
          const double z = 2 * a / std::sqrt(1 - p);
          moderate &= z < 500;
          if (moderate) indep += std::log(std::cyl_bessel_i(0.0, z));
        }
        const double f = geometric_objective(p, st);
        if (moderate) {
          EXPECT_NEAR(f, indep, 1e-11 * std::max(1.0, std::abs(f))) << regime << sigma << plus;
        }
        const double tol = 1e-12 * std::max(1.0, std::abs(f));
        const double room = std::min(p, 1 - p);
        for (double rel : {1e-2, 1e-3, 1e-4, 1e-5}) {
          EXPECT_GE(geometric_objective(p + rel * room, st), f - tol) << regime << sigma << plus << " +" << rel;
          EXPECT_GE(geometric_objective(p - rel * room, st), f - tol) << regime << sigma << plus << " -" << rel;
        }
        for (double g = 0.001; g < 1; g += 0.001) EXPECT_GE(geometric_objective(g, st), f - tol) << g;
      }
    }
  }
}

TEST(DiscreteFit, ShiftMakesFittingSetsPositiveWithoutClamping) {
  const arma::mat X = test::points(6, 50, 2.0, 43), Y = test::points(6, 40, 2.0, 44) - 3.0;
  const ShiftParams s = fit_shift(X, Y);
  EXPECT_EQ(s.epsilon, 1e-8);
  const arma::vec m = arma::min(arma::min(X, 1), arma::min(Y, 1));
  EXPECT_TRUE(arma::approx_equal(s.c, m - 1e-8, "absdiff", 1e-14));
  const arma::mat Xh = shift_points(s, X), Yh = shift_points(s, Y);
  EXPECT_GE(Xh.min(), 1e-8);
  EXPECT_GE(Yh.min(), 1e-8);
  EXPECT_LT(std::min(Xh.min(), Yh.min()), 1e-8 * (1 + 1e-6));  // the minimum sits at epsilon
  // No fitting point is clamped: x_hat - y_hat = x - y, and so the correction term in log_var_over_k2 is 0.
  EXPECT_TRUE(arma::approx_equal(Xh.each_col() + s.c, X, "absdiff", 1e-14));
  // A new input below c is clamped to epsilon.
  arma::mat Z = X.col(0);
  Z(0) = s.c(0) - 1.0;
  EXPECT_EQ(shift_points(s, Z)(0), 1e-8);
}

TEST(DiscreteFit, ParamsJsonRecordsTheFit) {
  const arma::mat X = test::points(4, 20, 0.5, 45), Y = test::points(4, 20, 0.5, 46);
  const auto pj = make_estimator("pois", X, Y)->params();
  EXPECT_EQ(pj["family"], "pois");
  EXPECT_DOUBLE_EQ(pj["lambda"].get<double>(), poisson_lambda_star(discrete_stats(X, Y)));
  const auto gj = make_estimator("geom+", X, Y)->params();
  EXPECT_EQ(gj["family"], "geom+");
  EXPECT_GT(gj["p"].get<double>(), 0.0);
  EXPECT_LT(gj["p"].get<double>(), 1.0);
  EXPECT_EQ(gj["shift_epsilon"].get<double>(), 1e-8);
  EXPECT_LE(gj["shift_c_min"].get<double>(), gj["shift_c_max"].get<double>());
}

TEST(Discrete, BadInput) {
  // Invalid parameters.
  for (double lambda : {0.0, -1.0, arma::datum::nan, arma::datum::inf})
    EXPECT_THROW(DiscreteEstimator("x", 3, {DiscreteKind::Poisson, lambda, 0.5}), InvalidArgument) << lambda;
  for (double p : {0.0, 1.0, -0.1, 1.5, arma::datum::nan})
    EXPECT_THROW(DiscreteEstimator("x", 3, {DiscreteKind::Geometric, 1.0, p}), InvalidArgument) << p;
  EXPECT_THROW(DiscreteEstimator("x", 0, kPois07), InvalidArgument);
  EXPECT_THROW(DiscreteEstimator("x", 3, kPois07, ShiftParams{arma::vec(2, arma::fill::zeros), 1e-8}), InvalidArgument);
  EXPECT_THROW(DiscreteEstimator("x", 2, kPois07, ShiftParams{arma::vec(2, arma::fill::zeros), 0.0}), InvalidArgument);
  const DiscreteStats st = discrete_stats(arma::ones(2, 3), arma::ones(2, 3));
  EXPECT_THROW(poisson_objective(0.0, st), InvalidArgument);
  EXPECT_THROW(geometric_objective(1.0, st), InvalidArgument);
  EXPECT_THROW(fit_shift(arma::ones(2, 3), arma::ones(2, 3), -1e-8), InvalidArgument);
  // Zero statistic: every coordinate is zero in X or in Y -> no valid lambda* / p (clear error, never NaN).
  arma::mat Xz(2, 3, arma::fill::zeros), Yz(2, 3, arma::fill::ones);
  Xz(0, 1) = 1.0;
  Yz.row(0).zeros();
  for (const char* n : {"pois", "geom"}) EXPECT_THROW(make_estimator(n, Xz, Yz), InvalidArgument) << n;
  // Empty sets, NaN / Inf inputs, dimension mismatch.
  for (const char* n : {"pois", "geom", "pois+", "geom+"}) {
    EXPECT_THROW(make_estimator(n, arma::mat(2, 0), arma::ones(2, 2)), InvalidArgument) << n;
    EXPECT_THROW(make_estimator(n, arma::mat(0, 2), arma::mat(0, 2)), InvalidArgument) << n;
    EXPECT_THROW(make_estimator(n, arma::ones(3, 2), arma::ones(2, 2)), InvalidArgument) << n;
    arma::mat bad = arma::ones(2, 2);
    bad(1, 0) = arma::datum::nan;
    EXPECT_THROW(make_estimator(n, bad, arma::ones(2, 2)), InvalidArgument) << n;
    bad(1, 0) = arma::datum::inf;
    EXPECT_THROW(make_estimator(n, arma::ones(2, 2), bad), InvalidArgument) << n;
    const auto e = make_estimator(n, arma::ones(2, 2), 0.5 * arma::ones(2, 2));
    EXPECT_THROW(e->log_var_over_k2(arma::ones(3, 2), arma::ones(3, 2)), InvalidArgument) << n;
    EXPECT_THROW(e->log_var_over_k2(arma::ones(2, 2), bad), InvalidArgument) << n;
    Rng rng(1);
    EXPECT_THROW(e->draw(0, rng, Sampler::Iid), InvalidArgument) << n;
    const Draw w = e->draw(3, rng, Sampler::Iid);
    EXPECT_THROW(e->features(w, arma::ones(3, 2), Side::Query), InvalidArgument) << n;
    Draw neg = w;
    neg.counts(0, 0) = -1;
    EXPECT_THROW(e->features(neg, arma::ones(2, 2), Side::Query), InvalidArgument) << n;
    neg.counts(0, 0) = 0.5;
    EXPECT_THROW(e->features(neg, arma::ones(2, 2), Side::Query), InvalidArgument) << n;
    Draw wrong_d;
    wrong_d.counts = arma::ones(3, 2);
    EXPECT_THROW(e->features(wrong_d, arma::ones(2, 2), Side::Query), InvalidArgument) << n;
  }
}

TEST(DiscreteStress, NormalRegimeD64Sigma1AllLogVariancesFinite) {
  const SetPair sp = draw_regime({.name = "normal", .dim = 64, .points = 256, .sigma = 1.0, .seed = 7});
  for (const char* name : {"pois", "geom", "pois+", "geom+"}) {
    const auto e = make_estimator(name, sp.X, sp.Y);
    for (const Kernel& k : {Kernel::softmax(), Kernel::gaussian()}) {
      const arma::mat lv = log_variance(*e, k, sp.X, sp.Y);
      EXPECT_TRUE(lv.is_finite()) << name << " alpha=" << k.alpha;
    }
    const arma::mat r = e->log_var_over_k2(sp.X, sp.Y);
    EXPECT_GT(r.min(), 0.0) << name;  // far from exact at d = 64, sigma = 1
    const nlohmann::json params = e->params();
    for (const auto& [key, v] : params.items()) {
      if (v.is_number()) {
        EXPECT_TRUE(std::isfinite(v.get<double>())) << name << " " << key;
      }
    }
    // Features of one draw stay finite (log-domain evaluation) on these inputs.
    Rng rng(9);
    const Draw w = e->draw(16, rng, Sampler::Iid);
    EXPECT_TRUE(e->features(w, sp.X.cols(0, 31), Side::Query).is_finite()) << name;
  }
}
