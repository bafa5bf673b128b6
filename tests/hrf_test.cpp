// Hybrid random features (HRF paper): complex exponential estimators, angular / Gaussian-lambda hybrids,
// clustered HRF. Every exact MSE is checked against the Monte Carlo simulator with |empirical - exact|
// < 4.5 standard errors (test_util.hpp: P(|Z| > 4.5) = 6.8e-6 per check); each test states its number
// of checks and the union-bound false-failure rate. Deterministic identities use tight tolerances.
#include <gtest/gtest.h>

#include "analysis/montecarlo.hpp"
#include "core/error.hpp"
#include "core/logmath.hpp"
#include "estimators/gerf/gerf.hpp"
#include "estimators/hrf/cexp.hpp"
#include "estimators/hrf/cluster.hpp"
#include "estimators/hrf/hybrid.hpp"
#include "estimators/registry.hpp"
#include "test_util.hpp"

using namespace kestrel;
using cplx = std::complex<double>;

namespace {

// Checks mean (unbiasedness) and variance of every entry of the M-feature estimate; returns #checks.
int expect_mc_matches(const Estimator& e, const arma::mat& X, const arma::mat& Y, arma::uword M, std::size_t reps,
                      std::uint64_t seed, Sampler sampler = Sampler::Iid) {
  const MonteCarloResult r = simulate(e, Kernel::softmax(), X, Y, {reps, M, seed, sampler});
  const arma::mat exact_var = arma::exp(log_variance(e, Kernel::softmax(), X, Y, M));
  const auto& m = r.kernel;
  for (arma::uword i = 0; i < exact_var.n_elem; ++i) {
    EXPECT_LT(std::abs(m.mean(i) - m.exact(i)), test::kSigmas * m.se_mean(i))
        << e.info().name << " M=" << M << " seed " << seed << " entry " << i << ": mean " << m.mean(i) << " vs K "
        << m.exact(i);
    EXPECT_LT(std::abs(m.variance(i) - exact_var(i)), test::kSigmas * m.se_variance(i))
        << e.info().name << " M=" << M << " seed " << seed << " entry " << i << ": MC var " << m.variance(i)
        << " vs exact " << exact_var(i) << " (se " << m.se_variance(i) << ")";
  }
  return static_cast<int>(2 * exact_var.n_elem);
}

// x = r e1, y = r (cos t e1 + sin t e2) in R^d: |x| = |y| = r, angle t.
std::pair<arma::mat, arma::mat> sphere_pair(arma::uword d, double r, double t) {
  arma::mat x(d, 1, arma::fill::zeros), y(d, 1, arma::fill::zeros);
  x(0, 0) = r;
  y(0, 0) = r * std::cos(t);
  y(1, 0) = r * std::sin(t);
  return {x, y};
}

arma::cx_mat complex_test_matrix(arma::uword d, std::uint64_t seed) {
  const arma::mat re = test::points(d, d, 0.15, seed), im = test::points(d, d, 0.15, seed + 1);
  return arma::cx_mat(re + arma::eye(d, d), im + 0.3 * arma::eye(d, d));
}

HybridEstimator angular(arma::uword d, arma::uword n = 0, bool shared = false) {
  return HybridEstimator("hrf-angular", d, HybridParams{.lambda_features = n, .shared_projections = shared});
}
HybridEstimator gauss(arma::uword d, arma::uword n = 0, bool shared = false, double sigma = 0.8, double rho = 0.6) {
  return HybridEstimator("hrf-gauss", d,
                         HybridParams{.lambda = LambdaKind::Gaussian,
                                      .lambda_features = n,
                                      .shared_projections = shared,
                                      .sigma = sigma,
                                      .rho = rho});
}

}  // namespace

// ---- Complex exponential estimators (eq. 14-18) -------------------------------------------------------

TEST(HrfCexp, TrigAndPosAreSpecialCases) {
  // A = iI is TrigRF and A = I the one-sided PosRF (HRF 2.3): exact formulas agree to rounding.
  const arma::mat X = test::points(4, 5, 0.7, 201), Y = test::points(4, 6, 0.7, 202);
  const CexpEstimator ce_trig("ce-trig", arma::cx_mat(arma::zeros(4, 4), arma::eye(4, 4)));
  const CexpEstimator ce_pos("ce-pos", arma::cx_mat(arma::eye(4, 4), arma::zeros(4, 4)));
  const GerfEstimator trig("trig", 4, GerfParams{0.0, -1}), pos("pos", 4, GerfParams{0.0, 1});
  EXPECT_TRUE(arma::approx_equal(ce_trig.log_var_over_k2(X, Y), trig.log_var_over_k2(X, Y), "absdiff", 1e-10));
  EXPECT_TRUE(arma::approx_equal(ce_pos.log_var_over_k2(X, Y), pos.log_var_over_k2(X, Y), "absdiff", 1e-10));
}

TEST(HrfCexp, ExactVarianceMatchesMonteCarlo) {
  // Real general A, complex general A, complex diagonal A from centres; M = 1 and M = 3.
  // 3 estimators x 2 M x 9 entries x 2 checks = 108 checks at 4.5 se: false-failure rate <= 7.4e-4.
  const arma::mat X = test::points(3, 3, 0.3, 211), Y = test::points(3, 3, 0.3, 212);
  const arma::vec ri = X.col(0) + 0.05, rj = Y.col(0) - 0.05;
  std::vector<CexpEstimator> cases;
  cases.emplace_back("ce-real", arma::cx_mat(arma::real(complex_test_matrix(3, 213)), arma::zeros(3, 3)));
  cases.emplace_back("ce-complex", complex_test_matrix(3, 215));
  cases.emplace_back("ce-diag", arma::cx_mat(arma::diagmat(cexp_complex_diagonal(ri, rj))));
  int checks = 0;
  for (const auto& e : cases)
    for (arma::uword M : {1u, 3u}) checks += expect_mc_matches(e, X, Y, M, 20000, 216 + M);
  EXPECT_EQ(checks, 108);
}

TEST(HrfCexp, VarianceCheckHasPowerAgainstA25PercentError) {
  // Negative control for the complex A case: most of the 9 entries reject a variance 25% off.
  const arma::mat X = test::points(3, 3, 0.3, 211), Y = test::points(3, 3, 0.3, 212);
  const CexpEstimator e("ce-complex", complex_test_matrix(3, 215));
  const MonteCarloResult r = simulate(e, Kernel::softmax(), X, Y, {20000, 1, 217, Sampler::Iid});
  const arma::mat wrong = 1.25 * arma::exp(log_variance(e, Kernel::softmax(), X, Y));
  EXPECT_GE(arma::accu(arma::abs(r.kernel.variance - wrong) / r.kernel.se_variance > test::kSigmas), 5u);
}

TEST(HrfCexp, ComplexDiagonalIsExactAtTheCentres) {
  // eq. (17)/(85)-(87): A_ij ri + A_ij^-1 rj = 0, so the variance is 0 at (ri, rj): log = -inf, and every
  // draw returns K exactly. In floating point u = a ri + rj / a is ~1e-16 |r|, so Var/K^2 ~ |u|^2
  // ~ e^-70 instead of 0: the check is log(Var/K^2) < -60. The real diagonal (eq. 88) has l(A) = 4 sum_{same sign} ri
  // rj.
  const arma::mat C = test::points(6, 2, 1.0, 221);
  const arma::vec ri = C.col(0), rj = C.col(1);
  const arma::cx_vec a = cexp_complex_diagonal(ri, rj);
  EXPECT_LT(cexp_loss(a, ri, rj), 1e-24);
  const CexpEstimator e("ce-diag", arma::cx_mat(arma::diagmat(a)));
  EXPECT_LT(e.log_var_over_k2(ri, rj)(0, 0), -60.0);
  Rng rng(222);
  const Draw w = e.draw(16, rng, Sampler::Iid);
  const double est = arma::as_scalar(approximate_kernel(e, w, ri, rj, Kernel::softmax()));
  EXPECT_NEAR(est / std::exp(arma::dot(ri, rj)), 1.0, 1e-10);
  const arma::vec ar = cexp_real_diagonal(ri, rj);
  double expect_loss = 0;
  for (arma::uword k = 0; k < 6; ++k)
    if (ri(k) * rj(k) > 0) expect_loss += 4 * ri(k) * rj(k);
  EXPECT_NEAR(cexp_loss(arma::conv_to<arma::cx_vec>::from(ar), ri, rj), expect_loss, 1e-12 * (1 + expect_loss));
}

// ---- Lemma 2.2, Thm 3.1, Lemma 3.2, Thm F.1 ---------------------------------------------------------------

TEST(HrfLemma22, ClosedFormsEqualTheEstimatorsAndMonteCarlo) {
  // Lemma 2.2 as printed equals trig's and the hyperbolic pos's exact variance (deterministic), and the
  // hyperbolic PosRF matches Monte Carlo: 9 entries x 2 checks x 2 M = 36 checks, rate <= 2.5e-4.
  const arma::mat X = test::points(3, 3, 0.35, 231), Y = test::points(3, 3, 0.35, 232);
  const PosHypEstimator pos(3);
  const GerfEstimator trig("trig", 3, GerfParams{0.0, -1});
  for (arma::uword m : {1u, 7u}) {
    const arma::mat lp = log_variance(pos, Kernel::softmax(), X, Y, m),
                    lt = log_variance(trig, Kernel::softmax(), X, Y, m);
    for (arma::uword i = 0; i < 3; ++i)
      for (arma::uword j = 0; j < 3; ++j) {
        EXPECT_NEAR(lemma22_log_mse_pos(X.col(i), Y.col(j), m), lp(i, j), 1e-10);
        EXPECT_NEAR(lemma22_log_mse_trig(X.col(i), Y.col(j), m), lt(i, j), 1e-10);
      }
  }
  int checks = 0;
  for (arma::uword M : {1u, 4u}) checks += expect_mc_matches(pos, X, Y, M, 20000, 233 + M);
  EXPECT_EQ(checks, 36);
}

TEST(HrfThm31, IndependentProjectionsMatchMonteCarlo) {
  // eq. (22) with Lemma 3.2 (angular) and eq. (72)-(73) (gaussian); unequal lengths; M in {1, 3},
  // n = M and n = 2 fixed. 2 lambdas x 3 settings x 12 entries x 2 checks = 144 checks, rate <= 9.8e-4.
  const arma::mat X = test::points(3, 3, 0.35, 241), Y = test::points(3, 4, 0.35, 242) + 0.1;
  int checks = 0;
  for (int kind = 0; kind < 2; ++kind)
    for (auto [M, n] : {std::pair<arma::uword, arma::uword>{1, 0}, {3, 0}, {3, 2}}) {
      const HybridEstimator e = kind == 0 ? angular(3, n) : gauss(3, n);
      checks += expect_mc_matches(e, X, Y, M, 20000, 243 + 10 * kind + M + n);
    }
  EXPECT_EQ(checks, 144);
}

TEST(HrfThm31, SharedProjectionsMatchMonteCarloAndDifferFromIndependent) {
  // eq. (23): shared projections subtract (2/m) SM^2 (1 - cos(|x|^2 - |y|^2)) E[l(1-l)]. Lengths differ
  // strongly so the term matters. 2 lambdas x 2 M x 9 entries x 2 checks = 72 checks, rate <= 4.9e-4.
  arma::mat X = test::points(3, 3, 0.3, 251), Y = test::points(3, 3, 0.3, 252);
  X.col(0) *= 3.0;
  Y.col(1) *= 3.0;
  int checks = 0;
  for (int kind = 0; kind < 2; ++kind)
    for (arma::uword M : {1u, 2u}) {
      const HybridEstimator e = kind == 0 ? angular(3, 2, true) : gauss(3, 2, true);
      checks += expect_mc_matches(e, X, Y, M, 30000, 253 + 10 * kind + M);
    }
  EXPECT_EQ(checks, 72);
  // The two variants' formulas differ where |x| != |y| (and agree where the term vanishes).
  const arma::mat ind = angular(3, 2, false).log_var_over_k2_m(X, Y, 2),
                  sh = angular(3, 2, true).log_var_over_k2_m(X, Y, 2);
  EXPECT_TRUE(arma::all(arma::vectorise(sh <= ind + 1e-12)));
  EXPECT_GT(arma::max(arma::vectorise(ind - sh)), 0.05);
}

TEST(HrfThm31, SharedVariantRejectsTheIndependentFormula) {
  // Negative control: simulating the shared-projection angular hybrid, the independent formula (22)
  // is rejected at 4.5 se on the entry with the largest predicted difference.
  arma::mat X(2, 1, arma::fill::zeros), Y(2, 1, arma::fill::zeros);
  X(0, 0) = 1.2;  // |x|^2 - |y|^2 = 1.4: 1 - cos = 0.83
  Y(1, 0) = 0.2;
  const HybridEstimator sh = angular(2, 4, true), ind = angular(2, 4, false);
  const MonteCarloResult r = simulate(sh, Kernel::softmax(), X, Y, {40000, 1, 259, Sampler::Iid});
  const double v_ind = std::exp(log_variance(ind, Kernel::softmax(), X, Y, 1)(0, 0));
  const double v_sh = std::exp(log_variance(sh, Kernel::softmax(), X, Y, 1)(0, 0));
  EXPECT_LT(std::abs(r.kernel.variance(0) - v_sh), test::kSigmas * r.kernel.se_variance(0));
  EXPECT_GT(std::abs(r.kernel.variance(0) - v_ind), test::kSigmas * r.kernel.se_variance(0))
      << "MC " << r.kernel.variance(0) << " independent " << v_ind << " shared " << v_sh;
}

TEST(HrfThm31, AngularOnTheSphereAtD64MatchesMonteCarlo) {
  // eq. (47) at d = 64 on S(0.4) (small r keeps the 4th moment of pos-hyp finite enough for reliable
  // standard errors; at r >= 1 the Monte Carlo variance is heavy-tailed and its SE unreliable).
  // 5 angles x 2 (m, n) settings x 2 checks = 20 checks at 4.5 se: false-failure rate <= 1.4e-4.
  int checks = 0;
  for (double t : {0.2, 0.6, 1.5708, 2.4, 3.0})  // t = 0 is exact (tested below)
    for (auto [m, n] : {std::pair<arma::uword, arma::uword>{4, 1}, {2, 3}}) {
      const auto [x, y] = sphere_pair(64, 0.4, t);
      const HybridEstimator e = angular(64, n);
      checks += expect_mc_matches(e, x, y, m, 20000, 500 + static_cast<std::uint64_t>(10 * t) + m);
      EXPECT_NEAR(std::exp(0.5 * e.log_var_over_k2_m(x, y, m)(0, 0)) / angular_hybrid_rel_error(t, 0.4, m, n), 1.0,
                  1e-9);
    }
  EXPECT_EQ(checks, 20);
}

TEST(HrfThm31, AngularArrayFormMatchesThePerPairForm) {
  // The angular hybrid's pairwise log(MSE/K^2) runs over arrays (issue #19); pair by pair it must equal
  // bipolar_log_mse_over_k2 of angular_lambda_moments of the angle 2 atan2(|u - v|, |u + v|), to rounding: libmvec's
  // <= 4 ulp per function, a few functions deep, gives 1e-13 of max(1, |log MSE|) with room (measured: < 3e-15).
  // Independent and shared projections, M = 1 and 7, n = M and n = 3, a zero point, parallel and antiparallel pairs,
  // log MSE/K^2 from -8 to 806.
  arma::mat X = test::points(5, 23, 0.6, 71), Y = test::points(5, 17, 0.6, 72);
  X.col(2).zeros();
  Y.col(3) = 2.0 * X.col(4);   // angle 0
  Y.col(4) = -0.5 * X.col(5);  // angle pi
  X.col(6) *= 1e-4;            // tiny kernel distance
  X.col(7) *= 14.0;            // huge |x + y|^2
  for (bool shared : {false, true})
    for (arma::uword n : {0u, 3u}) {
      const HybridEstimator e = angular(5, n, shared);
      for (arma::uword M : {1u, 7u}) {
        const arma::mat got = e.log_var_over_k2_m(X, Y, M);
        const arma::uword nl = n == 0 ? M : n;
        for (arma::uword j = 0; j < Y.n_cols; ++j)
          for (arma::uword i = 0; i < X.n_cols; ++i) {
            const arma::vec x = X.col(i), y = Y.col(j);
            const bool zero = !arma::any(x != 0.0) || !arma::any(y != 0.0);
            const arma::vec u = zero ? x : arma::vec(x / arma::norm(x)), v = zero ? y : arma::vec(y / arma::norm(y));
            const LambdaMoments lm =
                zero ? LambdaMoments{0.25, 0.25, 0.25}
                     : angular_lambda_moments(2.0 * std::atan2(arma::norm(u - v), arma::norm(u + v)), nl);
            const double want =
                bipolar_log_mse_over_k2(lm, arma::accu(arma::square(x + y)), arma::accu(arma::square(x - y)),
                                        arma::dot(x, x) - arma::dot(y, y), M, shared);
            if (want == -kInf) {
              EXPECT_EQ(got(i, j), -kInf) << i << " " << j;
            } else {
              EXPECT_NEAR(got(i, j), want, 1e-13 * std::max(1.0, std::abs(want)))
                  << "shared " << shared << " n " << n << " M " << M << " pair " << i << "," << j;
            }
          }
      }
    }
}

TEST(HrfLemma32, LambdaMomentsMatchMonteCarlo) {
  // E[lambda_hat] and E[lambda_hat^2] of the angular (eq. 24) and gaussian (eq. 72) lambdas for
  // n in {1, 5}: 2 kinds x 2 n x 6 pairs x 2 moments = 48 checks, rate <= 3.3e-4.
  const arma::mat X = test::points(4, 2, 0.8, 261), Y = test::points(4, 3, 0.8, 262);
  int checks = 0;
  for (int kind = 0; kind < 2; ++kind)
    for (arma::uword n : {1u, 5u}) {
      const HybridEstimator e = kind == 0 ? angular(4, n) : gauss(4, n);
      const std::size_t R = 20000;
      arma::mat s1(2, 3, arma::fill::zeros), s2 = s1, s3 = s1, s4 = s1;
      for (std::size_t r = 0; r < R; ++r) {
        Rng rng(263 + n + 7 * kind, Stream::MonteCarlo, r);
        const arma::mat L = e.lambda_estimate(e.draw(1, rng, Sampler::Iid), X, Y);
        const arma::mat L2 = L % L;
        s1 += L, s2 += L2, s3 += L2 % L, s4 += L2 % L2;
      }
      for (arma::uword i = 0; i < 2; ++i)
        for (arma::uword j = 0; j < 3; ++j) {
          const LambdaMoments lm = e.lambda_moments(X.col(i), Y.col(j), n);
          const double m1 = lm.l2 + lm.l_one_minus_l, m2 = lm.l2;  // E l = E l^2 + E l(1-l)
          const double e1 = s1(i, j) / R, e2 = s2(i, j) / R;
          const double se1 = std::sqrt(std::max(e2 - e1 * e1, 0.0) / R);
          const double se2 = std::sqrt(std::max(s4(i, j) / R - e2 * e2, 0.0) / R);
          EXPECT_LE(std::abs(e1 - m1), test::kSigmas * se1 + 1e-15)
              << kind << " n=" << n << " (" << i << "," << j << ")";
          EXPECT_LE(std::abs(e2 - m2), test::kSigmas * se2 + 1e-15)
              << kind << " n=" << n << " (" << i << "," << j << ")";
          checks += 2;
        }
      // n = 1 angular: lambda_hat is 0 or 1, so E l(1-l) = 0 exactly (eq. 24 gives t(1-t)(1-1/n)).
      if (kind == 0 && n == 1) {
        EXPECT_EQ(e.lambda_moments(X.col(0), Y.col(0), 1).l_one_minus_l, 0.0);
      }
    }
  EXPECT_EQ(checks, 48);
}

// ---- Lemma 3.4, Thm 3.5 (deterministic identities and the bound) --------------------------------------------

TEST(HrfLemma34, RelativeErrorsOfTrigAndPosOnTheSphere) {
  // eq. (25) from the exact variances of trig and the hyperbolic pos at d = 64; the max over angles is
  // W(r)/sqrt(2m) (eq. 26 prints sqrt(W(r)/2m)).
  const PosHypEstimator pos(64);
  const GerfEstimator trig("trig", 64, GerfParams{0.0, -1});
  for (double r : {0.5, 1.0, 1.5})
    for (arma::uword m : {1u, 10u})
      for (double t : {0.1, 0.7, 1.5, 2.5, M_PI}) {
        const auto [x, y] = sphere_pair(64, r, t);
        const auto [xp, yp] = sphere_pair(64, r, M_PI - t);
        const double et = std::exp(0.5 * log_variance(trig, Kernel::softmax(), x, y, m)(0, 0) - arma::dot(x, y));
        const double ep = std::exp(0.5 * log_variance(pos, Kernel::softmax(), xp, yp, m)(0, 0) - arma::dot(xp, yp));
        EXPECT_NEAR(et / lemma34_rel_error_trig(t, r, m), 1.0, 1e-9) << r << " " << m << " " << t;
        EXPECT_NEAR(ep / lemma34_rel_error_trig(t, r, m), 1.0, 1e-9) << r << " " << m << " " << t;
      }
  EXPECT_NEAR(lemma34_rel_error_trig(M_PI, 1.25, 3) / lemma34_max_rel_error(1.25, 3), 1.0, 1e-12);
}

TEST(HrfThm35, BoundHoldsOnAGridOfAnglesAndLengths) {
  // The exact max relative error of the angular hybrid on S(r) (eq. 47-48, from the estimator at
  // d = 64) against the bound of eq. (65) (as printed and with eq. 64 corrected), on 2001 angles.
  for (double r : {1.0, 1.25, 1.5, 2.0, 3.0})
    for (arma::uword m : {1u, 10u, 128u})
      for (arma::uword n : {1u, 4u, 16u}) {
        const HybridEstimator e = angular(64, n);
        double worst = 0;
        for (int g = 0; g <= 2000; ++g) {
          const double t = M_PI * g / 2000.0;
          const double closed = angular_hybrid_rel_error(t, r, m, n);
          worst = std::max(worst, closed);
          if (g % 100 == 50) {  // the estimator's exact formula gives the same number
            const auto [x, y] = sphere_pair(64, r, t);
            const double est = std::exp(0.5 * e.log_var_over_k2_m(x, y, m)(0, 0));
            EXPECT_NEAR(est / closed, 1.0, 1e-9) << r << " " << m << " " << n << " " << t;
          }
        }
        EXPECT_LE(worst, thm35_bound(r, m, n, false)) << "corrected bound, r=" << r << " m=" << m << " n=" << n;
        if (r <= 1.5) {
          EXPECT_LE(worst, thm35_bound(r, m, n, true)) << "printed bound, r=" << r;
        }
        // Trig / pos are worse: their max is W(r)/sqrt(2m) (Lemma 3.4).
        EXPECT_LT(worst, lemma34_max_rel_error(r, m));
      }
}

TEST(HrfThm35, VanishesLikeSqrtThetaAtBothEnds) {
  // eps_theta / sqrt(theta) -> W(r)/sqrt(2 pi m n) at theta -> 0 and (with pi - theta) at theta -> pi.
  for (double r : {1.0, 1.5})
    for (arma::uword n : {1u, 8u}) {
      const double c = thm35_limit_coefficient(r, 10, n), u = 1e-7;
      EXPECT_NEAR(angular_hybrid_rel_error(u, r, 10, n) / std::sqrt(u) / c, 1.0, 1e-4);
      EXPECT_NEAR(angular_hybrid_rel_error(M_PI - u, r, 10, n) / std::sqrt(u) / c, 1.0, 1e-4);
    }
  // Exact zero at theta = 0 and pi for equal lengths (both variants).
  const auto [x0, y0] = sphere_pair(5, 1.2, 0.0);
  EXPECT_EQ(angular(5).log_var_over_k2_m(x0, y0, 4)(0, 0), -kInf);
  EXPECT_EQ(angular(5, 0, true).log_var_over_k2_m(x0, -x0, 4)(0, 0), -kInf);
}

// ---- Lemma 2.3: the features give the hybrid estimate -------------------------------------------------------

TEST(HrfFeatures, DotProductsEqualTheDirectHybridEstimate) {
  const arma::mat X = test::points(5, 7, 0.6, 271), Y = test::points(5, 6, 0.6, 272);
  for (int kind = 0; kind < 2; ++kind)
    for (bool shared : {false, true})
      for (arma::uword n : {0u, 3u})
        for (Sampler s : {Sampler::Iid, Sampler::Orthogonal}) {
          const HybridEstimator e = kind == 0 ? angular(5, n, shared) : gauss(5, n, shared);
          Rng rng(273);
          const Draw w = e.draw(6, rng, s);
          const arma::mat P = e.features(w, X, Side::Query), S = e.features(w, Y, Side::Key);
          const arma::uword nn = n == 0 ? 6 : n, per = kind == 0 ? nn : 2 * nn;
          EXPECT_EQ(P.n_cols, 4 * 6 * (per + 1));
          const arma::mat direct = e.direct_estimate(w, X, Y);
          EXPECT_LT(arma::abs(P * S.t() - direct).max(), 1e-12 * arma::abs(direct).max() + 1e-12);
        }
}

TEST(HrfFeatures, ClusteredFeaturesPickTheCentrePairEstimator) {
  // P S^T of the clustered HRF equals, entry by entry, the CE estimate with A_ij of the entry's clusters.
  const arma::mat X = arma::join_rows(test::points(4, 5, 0.2, 281) + 1.0, test::points(4, 5, 0.2, 282) - 1.0);
  const arma::mat Y = arma::join_rows(test::points(4, 4, 0.2, 283) + 0.5, test::points(4, 4, 0.2, 284) - 0.7);
  for (bool cplx_diag : {false, true}) {
    const ClusteredHrfEstimator e("c", X, Y, ClusterHrfOptions{.complex_diagonal = cplx_diag});
    Rng rng(285);
    const Draw w = e.draw(5, rng, Sampler::Iid);
    const arma::mat est = approximate_kernel(e, w, X, Y, Kernel::softmax());
    const arma::uvec lx = nearest_centre(X, e.query_centres()), ly = nearest_centre(Y, e.key_centres());
    for (arma::uword i = 0; i < X.n_cols; ++i)
      for (arma::uword j = 0; j < Y.n_cols; ++j) {
        const CexpEstimator ce("ce", arma::cx_mat(arma::diagmat(e.diagonal(lx(i), ly(j)))));
        const double ref = arma::as_scalar(approximate_kernel(ce, w, X.col(i), Y.col(j), Kernel::softmax()));
        EXPECT_NEAR(est(i, j), ref, 1e-12 * std::abs(ref) + 1e-14);
      }
  }
}

// ---- Clustered HRF ------------------------------------------------------------------------------------------

TEST(HrfCluster, KMeansIsDeterministicAndFindsSeparatedClusters) {
  const arma::mat X = arma::join_rows(test::points(3, 30, 0.1, 291) + 2.0, test::points(3, 20, 0.1, 292) - 2.0);
  Rng r1(5), r2(5);
  const KMeansResult a = kmeans(X, r1, {2, 100}), b = kmeans(X, r2, {2, 100});
  EXPECT_TRUE(arma::approx_equal(a.centres, b.centres, "absdiff", 0.0));
  EXPECT_TRUE(a.converged);
  EXPECT_EQ(arma::accu(a.labels == a.labels(0)), 30u);  // first 30 together, last 20 together
  EXPECT_TRUE(arma::all(a.labels.head(30) == a.labels(0)));
  EXPECT_TRUE(arma::all(a.labels.tail(20) != a.labels(0)));
  Rng r3(6);
  const KMeansResult one = kmeans(X, r3, {1, 100});
  EXPECT_TRUE(arma::approx_equal(one.centres, arma::mean(X, 1), "absdiff", 1e-12));
}

TEST(HrfCluster, ExactMseMatchesMonteCarlo) {
  // Zero-one lambdas: the MSE at (x, y) is the CE variance with A_ij (real and complex diagonals).
  // 2 variants x 2 M x (4 x 4) entries x 2 checks = 128 checks at 4.5 se, rate <= 8.7e-4.
  const arma::mat X = arma::join_rows(test::points(3, 2, 0.1, 301) + 0.4, test::points(3, 2, 0.1, 302) - 0.3);
  const arma::mat Y = arma::join_rows(test::points(3, 2, 0.1, 303) + 0.2, test::points(3, 2, 0.1, 304) - 0.4);
  int checks = 0;
  for (bool cplx_diag : {false, true}) {
    const ClusteredHrfEstimator e("c", X, Y, ClusterHrfOptions{.complex_diagonal = cplx_diag});
    for (arma::uword M : {1u, 3u}) checks += expect_mc_matches(e, X, Y, M, 20000, 305 + M + 10 * cplx_diag);
  }
  EXPECT_EQ(checks, 128);
}

TEST(HrfCluster, ComplexDiagonalExactAtCentresAndEmpiricalMseAgreesWithExact) {
  const arma::mat X = arma::join_rows(test::points(4, 10, 0.05, 311) + 0.5, test::points(4, 10, 0.05, 312) - 0.4);
  const arma::mat Y = arma::join_rows(test::points(4, 10, 0.05, 313) + 0.3, test::points(4, 10, 0.05, 314) - 0.6);
  const ClusteredHrfEstimator e("c", X, Y, ClusterHrfOptions{.complex_diagonal = true});
  EXPECT_LT(e.centre_losses().max(), 1e-20);
  EXPECT_LT(e.log_var_over_k2(e.query_centres(), e.key_centres()).max(), -60.0);  // 0 up to rounding of u
  // The empirical MSE over all 400 pairs (HRF Fig. 6's metric) agrees with the mean exact MSE: the
  // per-trial MSE is an average with mean exact_mean_mse. 2 estimators x 1 check, rate <= 1.4e-5.
  for (const char* name : {"hrf-cluster", "pos-hyp"}) {
    const auto est = make_estimator(name, X, Y);
    const EmpiricalMse r = empirical_mse(*est, Kernel::softmax(), X, Y, {4000, 8, 315, Sampler::Iid});
    const double exact = exact_mean_mse(*est, Kernel::softmax(), X, Y, 8);
    EXPECT_LT(std::abs(r.mean - exact), test::kSigmas * r.se) << name << ": " << r.mean << " vs " << exact;
    EXPECT_LE(r.min, r.mean);
    EXPECT_GE(r.max, r.mean);
  }
}

// ---- Registry, bad input, stress ----------------------------------------------------------------------------

TEST(HrfRegistry, NamesBuildEstimators) {
  const arma::mat X = test::points(4, 6, 0.5, 321), Y = test::points(4, 5, 0.5, 322);
  for (const char* n : {"pos-hyp", "hrf-angular", "hrf-gauss", "hrf-cluster", "hrf-cluster-complex"}) {
    const auto e = make_estimator(n, X, Y);
    EXPECT_EQ(e->info().name, n);
    EXPECT_FALSE(e->params().is_null());
    Rng rng(1);
    const arma::mat K = approximate_kernel(*e, e->draw(4, rng, Sampler::Iid), X, Y, Kernel::softmax());
    EXPECT_TRUE(K.is_finite());
  }
  // hrf-cluster on single-point sets uses one cluster per side.
  EXPECT_NO_THROW(make_estimator("hrf-cluster", X.col(0), Y.col(0)));
}

TEST(HrfBadInput, RejectedWithInvalidArgument) {
  const arma::mat X = test::points(3, 4, 0.5, 331), Y = test::points(3, 4, 0.5, 332);
  arma::mat Xnan = X;
  Xnan(1, 1) = arma::datum::nan;
  const HybridEstimator h = angular(3);
  EXPECT_THROW(h.log_var_over_k2(Xnan, Y), InvalidArgument);
  EXPECT_THROW(h.log_var_over_k2(arma::mat(3, 0), Y), InvalidArgument);
  EXPECT_THROW(h.log_var_over_k2(test::points(2, 4, 1, 1), Y), InvalidArgument);
  EXPECT_THROW(h.log_var_over_k2_m(X, Y, 0), InvalidArgument);
  Rng rng(1);
  EXPECT_THROW(h.draw(0, rng, Sampler::Iid), InvalidArgument);
  EXPECT_THROW(h.features(Draw{arma::mat(3, 4), {}}, X, Side::Query), InvalidArgument);  // 4 not divisible by 3
  EXPECT_THROW(h.features(Draw{arma::mat(2, 3), {}}, X, Side::Query), InvalidArgument);
  EXPECT_THROW(HybridEstimator("g", 3, HybridParams{.lambda = LambdaKind::Gaussian, .sigma = 0}), InvalidArgument);
  EXPECT_THROW(HybridEstimator("g", 3, HybridParams{.lambda = LambdaKind::Gaussian, .rho = -1}), InvalidArgument);
  EXPECT_THROW(HybridEstimator("g", 3, HybridParams{.lambda = LambdaKind::Gaussian, .sigma = arma::datum::nan}),
               InvalidArgument);
  EXPECT_THROW(HybridEstimator("a", 0, HybridParams{}), InvalidArgument);
  // Invalid A: singular, non-finite, wrong shape.
  EXPECT_THROW(CexpEstimator("ce", arma::cx_mat(arma::zeros(3, 3), arma::zeros(3, 3))), InvalidArgument);
  arma::cx_mat Anan(arma::eye(3, 3), arma::zeros(3, 3));
  Anan(0, 1) = cplx(arma::datum::nan, 0);
  EXPECT_THROW(CexpEstimator("ce", Anan), InvalidArgument);
  EXPECT_THROW(CexpEstimator("ce", arma::cx_mat(arma::ones(3, 2), arma::zeros(3, 2))), InvalidArgument);
  EXPECT_THROW(CexpEstimator("ce", arma::cx_mat()), InvalidArgument);
  const CexpEstimator ce("ce", arma::cx_mat(arma::eye(3, 3), arma::eye(3, 3)));
  EXPECT_THROW(ce.log_var_over_k2(X, test::points(4, 2, 1, 2)), InvalidArgument);
  EXPECT_THROW(cexp_complex_diagonal(arma::vec(3, arma::fill::ones), arma::vec(2, arma::fill::ones)), InvalidArgument);
  EXPECT_THROW(cexp_real_diagonal(arma::vec{1.0, arma::datum::inf}, arma::vec{1.0, 1.0}), InvalidArgument);
  // Closed forms.
  EXPECT_THROW(angular_lambda_moments(-0.1, 2), InvalidArgument);
  EXPECT_THROW(angular_lambda_moments(1.0, 0), InvalidArgument);
  EXPECT_THROW(gaussian_lambda_moments(1.0, -1.0, 0.5, 2), InvalidArgument);
  EXPECT_THROW(thm35_bound(0.5, 1, 1), InvalidArgument);
  EXPECT_THROW(lemma34_rel_error_trig(4.0, 1.0, 1), InvalidArgument);
  // k-means and the clustered estimator.
  Rng r2(2);
  EXPECT_THROW(kmeans(X, r2, {5, 10}), InvalidArgument);
  EXPECT_THROW(kmeans(X, r2, {0, 10}), InvalidArgument);
  EXPECT_THROW(kmeans(Xnan, r2, {2, 10}), InvalidArgument);
  EXPECT_THROW(ClusteredHrfEstimator("c", X, test::points(2, 4, 1, 3)), InvalidArgument);
  EXPECT_THROW(ClusteredHrfEstimator("c", ClusteredHrfEstimator::Centres{arma::mat(3, 0), Y}), InvalidArgument);
  const ClusteredHrfEstimator c("c", X, Y);
  EXPECT_THROW(c.log_var_over_k2(Xnan, Y), InvalidArgument);
  EXPECT_THROW(empirical_mse(c, Kernel::softmax(), X, Y, {1, 2, 0, Sampler::Iid}), InvalidArgument);
  EXPECT_THROW(make_estimator("hrf-gauss", X, Xnan), InvalidArgument);
}

TEST(HrfStress, D64LogMseFiniteForLargeAndSmallKernels) {
  // d = 64, norms from 0.1 to 4 (K from e^-16 to e^16, Var/K^2 up to e^64): every log MSE is finite,
  // or -inf only where exact; no NaN.
  Rng rng(341, Stream::User, 0);
  arma::mat X = rng.normal_matrix(64, 40), Y = rng.normal_matrix(64, 40);
  for (arma::uword i = 0; i < 40; ++i) {
    X.col(i) *= (0.1 + 3.9 * i / 39.0) / arma::norm(X.col(i));
    Y.col(i) *= (0.1 + 3.9 * (39 - i) / 39.0) / arma::norm(Y.col(i));
  }
  Y.col(5) = -X.col(5);  // theta = pi, equal lengths
  for (const char* n : {"pos-hyp", "hrf-angular", "hrf-gauss", "hrf-cluster", "hrf-cluster-complex"}) {
    const auto e = make_estimator(n, X, Y);
    for (arma::uword M : {1u, 128u}) {
      const arma::mat l = log_variance(*e, Kernel::softmax(), X, Y, M);
      EXPECT_FALSE(l.has_nan()) << n;
      EXPECT_FALSE(arma::any(arma::vectorise(l) == arma::datum::inf)) << n;
      EXPECT_LE(arma::accu(l == -arma::datum::inf), 1u) << n;  // only the antipodal pair may be exact
    }
  }
  // The angular hybrid is exact at the antipodal equal-length pair (theta = pi), in both variants.
  EXPECT_EQ(angular(64).log_var_over_k2_m(X.col(5), Y.col(5), 16)(0, 0), -kInf);
}
