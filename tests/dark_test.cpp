// DARK (darkformer.txt): the importance-weighted PRF (eq. 2), the N(0, Sigma) PRF for exp(q^T Sigma k)
// (eq. 3, 8), the optimal proposal Sigma* (Thm 3.2) and the expected variance over Gaussian inputs.
// Monte Carlo thresholds: |empirical - exact| < 4.5 standard errors (test_util.hpp, P = 6.8e-6 per
// check under the normal approximation); each test states its number of checks and its false-failure
// bound (union bound). Standard errors are only used where the theory says the 4th moment of the
// averaged quantity is finite (stated per test), so that the SE itself is consistent.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/montecarlo.hpp"
#include "core/error.hpp"
#include "core/logmath.hpp"
#include "data/regimes.hpp"
#include "estimators/dark/dark.hpp"
#include "estimators/derf/derf.hpp"
#include "estimators/gerf/gerf.hpp"
#include "estimators/registry.hpp"
#include "test_util.hpp"

using namespace kestrel;

namespace {

// A random orthogonal d x d matrix from a fixed stream (a Haar sample is not needed here).
arma::mat rotation(arma::uword d, std::uint64_t seed) {
  Rng rng(seed, Stream::User, 7);
  return haar_orthogonal(d, rng);
}

arma::mat with_spectrum(const arma::vec& eig, std::uint64_t seed) {
  const arma::mat U = rotation(eig.n_elem, seed);
  arma::mat S = U * arma::diagmat(eig) * U.t();
  return 0.5 * (S + S.t());
}

double log_det_sym(const arma::mat& A) {
  arma::vec e = arma::eig_sym(0.5 * (A + A.t()));
  return arma::accu(arma::log(e));
}

arma::mat sqrtm_sym(const arma::mat& A) {
  arma::vec e;
  arma::mat V;
  arma::eig_sym(e, V, 0.5 * (A + A.t()));
  return V * arma::diagmat(arma::sqrt(e)) * V.t();
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// The importance-weighted PRF: exact variance against simulation.

TEST(DarkMonteCarlo, ExactVarianceMatchesSimulation) {
  // E[(f1 f2)^(2p)] is finite iff every eigenvalue of Sigma is > 1 - 1/(2p); the sample variance's SE
  // needs p = 4 (sigma_min > 7/8): true for all three estimators (dark's and dark-iso's eigenvalues are
  // >= 1 by construction, the hand-made Sigma's are >= 0.9).
  // 3 estimators x 9 entries x 2 checks = 54 checks at 4.5 se: false-failure rate <= 3.7e-4.
  const arma::mat X = test::points(3, 3, 0.35, 41), Y = test::points(3, 3, 0.35, 42);
  std::vector<std::unique_ptr<Estimator>> es;
  es.push_back(make_estimator("dark", X, Y));
  es.push_back(make_estimator("dark-iso", X, Y));
  es.push_back(std::make_unique<DarkEstimator>("dark-hand", with_spectrum({0.9, 1.3, 2.2}, 3)));
  for (const auto& e : es) {
    ASSERT_GT(arma::eig_sym(dynamic_cast<const DarkEstimator&>(*e).sigma()).min(), 7.0 / 8.0);
    const MonteCarloResult r = simulate(*e, Kernel::softmax(), X, Y, {20000, 1, 201, Sampler::Iid});
    test::expect_moments(*e, Kernel::softmax(), X, Y, r);
  }
}

TEST(DarkMonteCarlo, MFeaturesAndGaussianKernel) {
  // Gaussian kernel, M = 3, shifted keys. 2 estimators x 4 entries x 2 = 16 checks:
  // false-failure rate <= 1.1e-4.
  const arma::mat X = test::points(4, 2, 0.25, 43), Y = test::points(4, 2, 0.25, 44) + 0.1;
  std::vector<std::unique_ptr<Estimator>> es;
  es.push_back(make_estimator("dark", X, Y));
  es.push_back(std::make_unique<DarkEstimator>("dark-hand", with_spectrum({0.95, 1.0, 1.5, 3.0}, 4)));
  for (const auto& e : es) {
    const MonteCarloResult r = simulate(*e, Kernel::gaussian(), X, Y, {10000, 3, 202, Sampler::Iid});
    const arma::mat exact_var = arma::exp(log_variance(*e, Kernel::gaussian(), X, Y, 3));
    for (arma::uword i = 0; i < exact_var.n_elem; ++i) {
      EXPECT_LT(std::abs(r.kernel.mean(i) - r.kernel.exact(i)), test::kSigmas * r.kernel.se_mean(i)) << i;
      EXPECT_LT(std::abs(r.kernel.variance(i) - exact_var(i)), test::kSigmas * r.kernel.se_variance(i)) << i;
    }
  }
}

TEST(DarkMonteCarlo, VarianceCheckHasPowerAgainstA25PercentError) {
  // Negative control: the same data and threshold reject a variance 25% off on most entries.
  const arma::mat X = test::points(3, 3, 0.35, 41), Y = test::points(3, 3, 0.35, 42);
  const DarkEstimator e("dark-hand", with_spectrum({0.9, 1.3, 2.2}, 3));
  const MonteCarloResult r = simulate(e, Kernel::softmax(), X, Y, {20000, 1, 201, Sampler::Iid});
  const arma::mat wrong = 1.25 * arma::exp(log_variance(e, Kernel::softmax(), X, Y));
  const arma::mat z = arma::abs(r.kernel.variance - wrong) / r.kernel.se_variance;
  EXPECT_GE(arma::accu(z > test::kSigmas), 7u) << "z = " << z.t();
}

TEST(DarkMonteCarlo, OrthogonalDrawsStayUnbiased) {
  // Orthogonal g (each column exactly N(0, I)), w = Sigma^(1/2) g: still unbiased, also for an
  // axis-aligned input (GUIDE trap). 2 inputs x 1 entry = 2 checks: false-failure rate <= 1.4e-5.
  arma::mat X(4, 1, arma::fill::zeros), Y(4, 1, arma::fill::zeros);
  X(0, 0) = 0.8;
  Y(0, 0) = 0.6;
  const DarkEstimator e("dark-hand", with_spectrum({0.95, 1.0, 1.5, 3.0}, 5));
  const MonteCarloResult r = simulate(e, Kernel::softmax(), X, Y, {20000, 4, 203, Sampler::Orthogonal});
  EXPECT_LT(std::abs(r.kernel.mean(0) - r.kernel.exact(0)), test::kSigmas * r.kernel.se_mean(0));
  const arma::mat X2 = test::points(4, 1, 0.4, 45), Y2 = test::points(4, 1, 0.4, 46);
  const MonteCarloResult r2 = simulate(e, Kernel::softmax(), X2, Y2, {20000, 4, 204, Sampler::Orthogonal});
  EXPECT_LT(std::abs(r2.kernel.mean(0) - r2.kernel.exact(0)), test::kSigmas * r2.kernel.se_mean(0));
}

// ---------------------------------------------------------------------------------------------------
// Deterministic identities.

TEST(Dark, IsTheDerfWithAEqualsIMinusSigmaOver4) {
  // In w = Sigma^(1/2) g: A = (I - Sigma)/4, B1 = B2 = Sigma^(1/2), C = -I/2, D = det(Sigma)^(1/4).
  // Two independently derived variance formulas and feature maps must agree to rounding.
  const arma::mat Sigma = with_spectrum({0.6, 0.9, 1.7, 4.0, 12.0}, 6);
  const arma::uword d = Sigma.n_rows;
  const DarkEstimator dark("dark", Sigma);
  DerfParams p;
  p.A = 0.25 * (arma::eye(d, d) - Sigma);
  p.B1 = p.B2 = sqrtm_sym(Sigma);
  p.C1 = p.C2 = -0.5 * arma::eye(d, d);
  p.log_D = 0.25 * log_det_sym(Sigma);
  const DerfEstimator derf("derf", p, {}, 1e-8);
  const arma::mat X = test::points(d, 6, 0.6, 47), Y = test::points(d, 5, 0.6, 48);
  const arma::mat a = dark.log_var_over_k2(X, Y), b = derf.log_var_over_k2(X, Y);
  EXPECT_LT(arma::abs(a - b).max(), 1e-10 * std::max(1.0, arma::abs(b).max()));
  Rng rng(5);
  const Draw g = derf.draw(7, rng, Sampler::Iid);
  const Draw w{p.B1 * g.omega, {}};
  for (Side side : {Side::Query, Side::Key}) {
    const arma::mat fa = dark.features(w, X, side), fb = derf.features(g, X, side);
    EXPECT_LT(arma::abs(fa / fb - 1.0).max(), 1e-11);
  }
}

TEST(Dark, IdentityProposalIsPosRF) {
  const arma::uword d = 4;
  const DarkEstimator dark("dark", arma::eye(d, d));
  const arma::mat X = test::points(d, 5, 0.5, 49), Y = test::points(d, 4, 0.5, 50);
  const auto pos = make_estimator("pos", X, Y);
  EXPECT_LT(arma::abs(dark.log_var_over_k2(X, Y) - pos->log_var_over_k2(X, Y)).max(), 1e-12);
  Rng r1(3), r2(3);
  const Draw a = dark.draw(6, r1, Sampler::Iid), b = pos->draw(6, r2, Sampler::Iid);
  EXPECT_LT(arma::abs(dark.features(a, X, Side::Query) / pos->features(b, X, Side::Query) - 1.0).max(), 1e-12);
  // The exact PosRF pair x = -y has zero variance: -inf, not NaN.
  EXPECT_EQ(dark.log_var_over_k2(X.col(0), -X.col(0))(0, 0), -kInf);
}

TEST(Dark, SecondMomentConstantIsNonnegativeAndStableNearIdentity) {
  // c0 = sum log sigma - 1/2 log(2 sigma - 1) >= 0, = 0 at Sigma = I, ~ (sigma - 1)^2 near it.
  for (double eps : {1e-9, 1e-5, 1e-2}) {
    const SymEigen s = validate_dark_proposal((1.0 + eps) * arma::eye(3, 3));
    const double c0 = dark_second_moment(s).c0;
    EXPECT_GE(c0, 0.0);
    // log(1+e) - log(1+2e)/2 = e^2/2 - e^3 + O(e^4), summed over 3 eigenvalues.
    EXPECT_NEAR(c0, 1.5 * eps * eps, 3.5 * eps * eps * eps + 1e-6 * c0) << eps;
  }
}

// ---------------------------------------------------------------------------------------------------
// The N(0, Sigma) PRF for the Mahalanobis kernel exp(q^T Sigma k) (DARK eq. 3, 8).

TEST(DarkMahalanobis, ExactVarianceMatchesSimulation) {
  // Own simulation loop (the simulator targets the softmax kernel): R draws of M = 1 feature; PosRF
  // features have all moments, so the SE of the sample variance is consistent.
  // 2 Sigmas x 9 entries x 2 checks = 36 checks at 4.5 se: false-failure rate <= 2.5e-4.
  const arma::mat X = test::points(3, 3, 0.4, 51), Y = test::points(3, 3, 0.4, 52);
  const arma::mat Mfac = {{1.2, -0.4, 0.3}, {0.0, 0.7, 0.5}};  // rank 2: singular Sigma
  for (const MahalanobisPrf& prf :
       {MahalanobisPrf::from_sigma(with_spectrum({0.2, 1.0, 2.5}, 8)), MahalanobisPrf::from_factor(Mfac)}) {
    const std::size_t R = 20000;
    arma::mat s1(3, 3, arma::fill::zeros);
    arma::cube samples(3, 3, R);
    Rng rng(606, Stream::MonteCarlo, prf.rank());
    for (std::size_t r = 0; r < R; ++r) {
      const Draw w = prf.draw(1, rng, Sampler::Iid);
      samples.slice(r) = prf.features(w, X) * prf.features(w, Y).t();
    }
    const arma::mat K = arma::exp(prf.log_kernel(X, Y));
    const arma::mat V = arma::exp(prf.log_var_over_k2(X, Y)) % arma::square(K);
    for (arma::uword i = 0; i < 3; ++i)
      for (arma::uword j = 0; j < 3; ++j) {
        const arma::vec v = arma::vectorise(samples.tube(i, j));
        const double m = arma::mean(v), var = arma::var(v);
        const double m4 = arma::mean(arma::pow(v - m, 4));
        const double Rd = static_cast<double>(R);
        const double se_m = std::sqrt(var / Rd), se_v = std::sqrt((m4 - var * var * (Rd - 3) / (Rd - 1)) / Rd);
        EXPECT_LT(std::abs(m - K(i, j)), test::kSigmas * se_m) << "rank " << prf.rank() << " (" << i << "," << j << ")";
        EXPECT_LT(std::abs(var - V(i, j)), test::kSigmas * se_v)
            << "rank " << prf.rank() << " (" << i << "," << j << ")";
      }
  }
}

TEST(DarkMahalanobis, IsPosRFOnReembeddedPoints) {
  // w = M^T g: f(w, x) = exp(g^T (M x) - |M x|^2 / 2), PosRF on M x, exactly (same g).
  const arma::mat Sigma = with_spectrum({0.3, 1.0, 1.8, 2.5}, 9);
  const MahalanobisPrf prf = MahalanobisPrf::from_sigma(Sigma);
  EXPECT_LT(arma::abs(prf.sigma() - Sigma).max(), 1e-12);
  const arma::mat X = test::points(4, 5, 0.5, 53), Y = test::points(4, 3, 0.5, 54);
  const arma::mat MX = prf.factor() * X, MY = prf.factor() * Y;
  const auto pos = make_estimator("pos", MX, MY);
  EXPECT_LT(arma::abs(prf.log_var_over_k2(X, Y) - pos->log_var_over_k2(MX, MY)).max(), 1e-11);
  EXPECT_LT(arma::abs(prf.log_kernel(X, Y) - X.t() * Sigma * Y).max(), 1e-12);
  Rng r1(4), r2(4);
  const Draw w = prf.draw(5, r1, Sampler::Orthogonal), g = pos->draw(5, r2, Sampler::Orthogonal);
  EXPECT_LT(arma::abs(prf.features(w, X) / pos->features(g, MX, Side::Query) - 1.0).max(), 1e-11);
}

TEST(DarkMahalanobis, Prop41ImportanceWeightedIsotropicDrawsHaveTheSameMean) {
  // Prop. 4.1: E_{N(0,I)}[(p_Sigma/p_I)(w) f(w,q) f(w,k)] = exp(q^T Sigma k). The weighted estimate's
  // p-th moment is finite iff every eigenvalue of Sigma is < p/(p-1); eigenvalues <= 1.25 < 4/3 give a
  // finite 4th moment (consistent SE). 4 entries = 4 checks: false-failure rate <= 2.7e-5.
  const arma::mat Sigma = with_spectrum({0.6, 0.9, 1.25}, 10);
  const MahalanobisPrf prf = MahalanobisPrf::from_sigma(Sigma);
  const arma::mat X = test::points(3, 2, 0.4, 55), Y = test::points(3, 2, 0.4, 56);
  const arma::mat Sinv = arma::inv_sympd(Sigma);
  const double half_log_det = 0.5 * log_det_sym(Sigma);
  const std::size_t R = 200000;
  Rng rng(707, Stream::MonteCarlo, 0);
  const arma::mat W = rng.normal_matrix(3, R);
  // log(p_Sigma/p_I)(w) = -1/2 log det Sigma - w^T Sigma^-1 w / 2 + |w|^2 / 2.
  const arma::rowvec logw = -half_log_det - 0.5 * arma::sum(W % (Sinv * W), 0) + 0.5 * arma::sum(arma::square(W), 0);
  const Draw d{W, {}};
  const arma::mat FX = prf.features(d, X) * std::sqrt(static_cast<double>(R));  // undo the 1/sqrt(M)
  const arma::mat FY = prf.features(d, Y) * std::sqrt(static_cast<double>(R));
  const arma::mat K = arma::exp(prf.log_kernel(X, Y));
  for (arma::uword i = 0; i < 2; ++i)
    for (arma::uword j = 0; j < 2; ++j) {
      const arma::rowvec v = arma::exp(logw) % FX.row(i) % FY.row(j);
      const double se = arma::stddev(v) / std::sqrt(static_cast<double>(R));
      EXPECT_LT(std::abs(arma::mean(v) - K(i, j)), test::kSigmas * se) << i << "," << j;
    }
}

// ---------------------------------------------------------------------------------------------------
// Expected variance over q, k ~ N(0, Lambda).

TEST(DarkExpected, ClosedFormAgreesWithJointGaussianAndSpecialCases) {
  // E[m2] from the w-integral of B_q B_k against the 3d-dimensional joint Gaussian (q, k, g) formula;
  // Sigma = I: det(I+2L)^-1/2 det(I-6L)^-1/2; Sigma = Sigma*: det(I-2L)^-1; E[K^2] = det(I-4L^2)^-1/2.
  const arma::vec lam = {0.01, 0.04, 0.09, 0.12, 0.16};
  const arma::mat L = with_spectrum(lam, 11);
  const arma::uword d = lam.n_elem;
  const arma::mat I = arma::eye(d, d);
  const OptimalProposal o = optimal_proposal(L);
  for (const arma::mat& Sigma :
       {arma::mat(I), o.Sigma, arma::mat(1.3 * I), with_spectrum({0.8, 1.1, 1.4, 2.0, 3.0}, 12)}) {
    const ExpectedVariance ev = dark_expected_variance(L, Sigma);
    ASSERT_TRUE(ev.finite);
    EXPECT_NEAR(ev.log_second_moment, dark_log_joint_moment(L, Sigma, 1), 1e-10);
  }
  EXPECT_NEAR(dark_expected_variance(L, I).log_second_moment,
              -0.5 * log_det_sym(I + 2 * L) - 0.5 * log_det_sym(I - 6 * L), 1e-11);
  EXPECT_NEAR(dark_expected_variance(L, o.Sigma).log_second_moment, -log_det_sym(I - 2 * L), 1e-11);
  EXPECT_NEAR(dark_expected_variance(L, I).log_kernel_sq, -0.5 * log_det_sym(I - 4 * L * L), 1e-12);
  // Sigma* = (I + 2L)(I - 2L)^-1 as printed in Thm 3.2.
  EXPECT_LT(arma::abs(o.Sigma - (I + 2 * L) * arma::inv(I - 2 * L)).max(), 1e-12);
  // Lambda = 0, Sigma = I: PosRF is exact at x = y = 0.
  EXPECT_EQ(dark_expected_variance(arma::zeros(d, d), I).log_variance, -kInf);
}

TEST(DarkExpected, ClosedFormMatchesAveragedPairFormulaAndFullMonteCarlo) {
  // Three estimates of E_{q,k}[Var] per case, each |mean - exact| < 4.5 se: the exact single-pair
  // variance averaged over Gaussian (q, k), the full Monte Carlo over (q, k, w) of (f1 f2)^2 - K^2, and
  // of (f1 f2)^2 against E[m2]. Validity of the SEs: dark_log_joint_moment(.., 4) finite, asserted.
  // 5 cases x 3 checks = 15 checks: false-failure rate <= 1.0e-4.
  // The joint 8th moment of f1 f2 is finite (per eigendirection, commuting case) iff
  // (1 + 8 l)(8 sigma - 7) > 64 l sigma: l < 1/120 for Sigma = I, l < 0.01108 for Sigma*; so these
  // checks are confined to small Lambda (the closed forms themselves hold up to l < 1/2, see above).
  const arma::mat Ls = with_spectrum({0.002, 0.004, 0.006, 0.008}, 13);   // PosRF's moments finite
  const arma::mat Lb = with_spectrum({0.003, 0.006, 0.009, 0.0105}, 14);  // only Sigma*'s are
  const arma::uword d = 4;
  struct Case {
    arma::mat L, Sigma;
    const char* name;
  };
  const std::vector<Case> cases = {{Ls, arma::eye(d, d), "small, Sigma = I"},
                                   {Ls, optimal_proposal(Ls).Sigma, "small, Sigma*"},
                                   {Ls, optimal_isotropic_scale(Ls) * arma::eye(d, d), "small, tau* I"},
                                   {Lb, optimal_proposal(Lb).Sigma, "big, Sigma*"},
                                   {Ls, with_spectrum({0.95, 1.0, 1.05, 1.1}, 15), "small, other Sigma"}};
  std::uint64_t seed = 300;
  for (const Case& c : cases) {
    const ExpectedVariance ev = dark_expected_variance(c.L, c.Sigma);
    ASSERT_TRUE(ev.finite) << c.name;
    const ExpectedVarianceMc mc = dark_expected_variance_mc(c.L, c.Sigma, {400000, seed++});
    ASSERT_TRUE(mc.se_reliable) << c.name;
    const double v = std::exp(ev.log_variance), m2 = std::exp(ev.log_second_moment);
    EXPECT_LT(std::abs(mc.mean_pair_variance - v), test::kSigmas * mc.se_pair_variance)
        << c.name << ": " << mc.mean_pair_variance << " vs " << v << " se " << mc.se_pair_variance;
    EXPECT_LT(std::abs(mc.mean_variance - v), test::kSigmas * mc.se_variance)
        << c.name << ": " << mc.mean_variance << " vs " << v << " se " << mc.se_variance;
    EXPECT_LT(std::abs(mc.mean_second_moment - m2), test::kSigmas * mc.se_second_moment)
        << c.name << ": " << mc.mean_second_moment << " vs " << m2 << " se " << mc.se_second_moment;
  }
  // Power: the full Monte Carlo rejects a closed form 25% off (big Lambda, Sigma*).
  const ExpectedVariance ev = dark_expected_variance(Lb, optimal_proposal(Lb).Sigma);
  const ExpectedVarianceMc mc = dark_expected_variance_mc(Lb, optimal_proposal(Lb).Sigma, {400000, 303});
  EXPECT_GT(std::abs(mc.mean_variance - 1.25 * std::exp(ev.log_variance)), test::kSigmas * mc.se_variance);
}

TEST(DarkExpected, SigmaStarMinimisesTheExpectedVariance) {
  // Thm 3.2 against 200 random symmetric perturbations of three sizes, the identity, and the best
  // isotropic proposal; plus a vanishing finite-difference gradient at Sigma*. Deterministic.
  const arma::vec lam = {0.02, 0.05, 0.1, 0.2, 0.3, 0.45};
  const arma::mat L = with_spectrum(lam, 16);
  const arma::uword d = lam.n_elem;
  const OptimalProposal o = optimal_proposal(L);
  const ExpectedVariance best = dark_expected_variance(L, o.Sigma);
  ASSERT_TRUE(best.finite);
  // Relative perturbations S = R (I + E) R, R = Sigma*^(1/2), |E| = eps < 1/2, keep S > Sigma*/2
  // (finite E[Var]) and S > I/2 (a valid proposal), so all 600 comparisons are made.
  Rng rng(17, Stream::User, 1);
  const arma::mat R = sqrtm_sym(o.Sigma);
  for (double eps : {1e-3, 1e-2, 1e-1}) {
    for (int t = 0; t < 200; ++t) {
      arma::mat E = rng.normal_matrix(d, d);
      E = 0.5 * (E + E.t());
      E *= eps / arma::norm(E, 2);
      arma::mat S = R * (arma::eye(d, d) + E) * R;
      S = 0.5 * (S + S.t());
      const ExpectedVariance ev = dark_expected_variance(L, S);
      ASSERT_TRUE(ev.finite) << "eps " << eps << " t " << t;
      EXPECT_GT(ev.log_variance, best.log_variance) << "eps " << eps << " t " << t;
    }
  }
  // Isotropic proposals: PosRF's E[Var] is infinite here (l_max = 0.45 >= 1/6); tau* I is finite but worse.
  EXPECT_FALSE(dark_expected_variance(L, arma::eye(d, d)).finite);
  const double tau = optimal_isotropic_scale(L);
  const ExpectedVariance iso = dark_expected_variance(L, tau * arma::eye(d, d));
  ASSERT_TRUE(iso.finite);
  EXPECT_GT(iso.log_variance, best.log_variance);
  for (double f : {0.999, 1.001})
    EXPECT_GT(dark_expected_variance(L, f * tau * arma::eye(d, d)).log_variance, iso.log_variance);
  // Finite-difference gradient of log E[m2] in the coordinates of Sigma: zero at Sigma* (second order).
  // A control point (1.1 Sigma*) shows the same measure is far from zero elsewhere.
  auto max_grad = [&](const arma::mat& S0) {
    const double h = 1e-5;
    double m = 0;
    for (arma::uword i = 0; i < d; ++i)
      for (arma::uword j = 0; j <= i; ++j) {
        arma::mat E(d, d, arma::fill::zeros);
        E(i, j) = E(j, i) = h;
        const double g = (dark_expected_variance(L, S0 + E).log_second_moment -
                          dark_expected_variance(L, S0 - E).log_second_moment) /
                         (2 * h);
        m = std::max(m, std::abs(g));
      }
    return m;
  };
  EXPECT_LT(max_grad(o.Sigma), 1e-6);
  EXPECT_GT(max_grad(1.1 * o.Sigma), 1e-3);
}

TEST(DarkExpected, OptimalIsotropicScaleMinimisesOverAGridOfTau) {
  // Strongly anisotropic Lambda (sigma*_max > 2 sigma*_min, so E[Var](tau I) is infinite for
  // tau <= sigma*_max / 2): tau* beats every finite point of a 400-point grid. Deterministic.
  for (double top : {0.15, 0.3, 0.45}) {
    arma::vec sp = parse_spectrum("geometric:10", 16);
    const arma::mat L = arma::diagmat(sp * (top / sp.max()));
    const OptimalProposal o = optimal_proposal(L);
    const double tau = optimal_isotropic_scale(L);
    const ExpectedVariance at = dark_expected_variance(L, tau * arma::eye(16, 16));
    ASSERT_TRUE(at.finite) << top;
    EXPECT_GT(tau, 0.5 * o.sigma.max());
    int finite = 0;
    for (int i = 1; i <= 400; ++i) {
      const double t = 0.5 * o.sigma.max() * (1.0 + 3.0 * i / 400.0);
      const ExpectedVariance ev = dark_expected_variance(L, t * arma::eye(16, 16));
      if (!ev.finite) continue;
      ++finite;
      EXPECT_GE(ev.log_variance, at.log_variance - 1e-12) << top << " tau " << t;
    }
    EXPECT_EQ(finite, 400);
    EXPECT_GT(at.log_variance, dark_expected_variance(L, o.Sigma).log_variance);
  }
}

TEST(DarkExpected, OptimalProposalIsIsotropicIffInputsAre) {
  // Thm 3.2 (1): Sigma* proportional to I iff Lambda is; then tau* equals Sigma*'s scalar.
  const arma::uword d = 5;
  const arma::mat Liso = 0.2 * arma::eye(d, d);
  const OptimalProposal o = optimal_proposal(Liso);
  EXPECT_LT(arma::abs(o.Sigma - (1.4 / 0.6) * arma::eye(d, d)).max(), 1e-12);
  EXPECT_NEAR(optimal_isotropic_scale(Liso), 1.4 / 0.6, 1e-12);
  const OptimalProposal a = optimal_proposal(with_spectrum({0.1, 0.1, 0.1, 0.1, 0.11}, 18));
  EXPECT_GT(a.sigma.max() - a.sigma.min(), 0.05);
  // Thm 3.2 (2): strict improvement over PosRF for every Lambda != 0 (here with PosRF finite).
  const arma::mat L = with_spectrum({0.0, 0.0, 0.0, 0.0, 0.1}, 19);
  EXPECT_LT(dark_expected_variance(L, optimal_proposal(L).Sigma).log_variance,
            dark_expected_variance(L, arma::eye(d, d)).log_variance);
}

TEST(DarkExpected, FinitenessBoundaries) {
  const arma::uword d = 3;
  const arma::mat I = arma::eye(d, d);
  // PosRF: finite iff l_max < 1/6.
  EXPECT_TRUE(dark_expected_variance(arma::diagmat(arma::vec{0.05, 0.1, 0.166}), I).finite);
  const ExpectedVariance inf_pos = dark_expected_variance(arma::diagmat(arma::vec{0.05, 0.1, 0.17}), I);
  EXPECT_FALSE(inf_pos.finite);
  EXPECT_EQ(inf_pos.log_variance, kInf);
  EXPECT_TRUE(std::isfinite(inf_pos.log_kernel_sq));
  // Sigma: finite iff Sigma > Sigma*/2.
  const arma::mat L = arma::diagmat(arma::vec{0.1, 0.2, 0.4});
  const OptimalProposal o = optimal_proposal(L);
  EXPECT_TRUE(dark_expected_variance(L, 0.51 * o.Sigma).finite);
  arma::mat S = o.Sigma;
  S(2, 2) = 0.45 * o.sigma(2);  // one direction below Sigma*/2 (sigma = 4.5 > 1/2, a valid proposal)
  EXPECT_FALSE(dark_expected_variance(L, S).finite);
  // Lambda with an eigenvalue >= 1/2: every expectation infinite, reported, never NaN.
  for (double top : {0.5, 0.8}) {
    const ExpectedVariance ev = dark_expected_variance(arma::diagmat(arma::vec{0.1, 0.2, top}), 3.0 * I);
    EXPECT_FALSE(ev.finite);
    EXPECT_EQ(ev.log_kernel_sq, kInf);
    EXPECT_EQ(ev.log_second_moment, kInf);
    EXPECT_FALSE(std::isnan(ev.log_variance));
  }
}

TEST(DarkOptimal, EigenvalueAtLeastHalfIsAClearError) {
  for (double top : {0.5, 0.7}) {
    const arma::mat L = arma::diagmat(arma::vec{0.1, 0.2, top});
    try {
      optimal_proposal(L);
      ADD_FAILURE() << "no error for l_max = " << top;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("1/2"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(fmt::format("is {}", top)), std::string::npos) << e.what();
    }
    EXPECT_THROW(optimal_isotropic_scale(L), InvalidArgument);
  }
  // Just below 1/2: Sigma* exists, huge but finite, and the estimator's variances are finite.
  const arma::mat L = with_spectrum({0.1, 0.2, 0.4999}, 21);
  const OptimalProposal o = optimal_proposal(L);
  EXPECT_NEAR(o.sigma.max(), 1.9998 / 0.0002, 1e-3 * 1.9998 / 0.0002);
  const DarkEstimator e("dark", o.Sigma);
  const arma::mat X = test::points(3, 20, 0.5, 57), Y = test::points(3, 20, 0.5, 58);
  EXPECT_TRUE(e.log_var_over_k2(X, Y).is_finite());
  // Data whose pooled second moment has an eigenvalue >= 1/2: make_dark fails with a clear error.
  const arma::mat Xb = test::points(3, 200, 1.0, 59), Yb = test::points(3, 200, 1.0, 60);
  EXPECT_THROW(make_estimator("dark", Xb, Yb), InvalidArgument);
  EXPECT_THROW(make_estimator("dark-iso", Xb, Yb), InvalidArgument);
}

TEST(Dark, BadInput) {
  const arma::mat I3 = arma::eye(3, 3);
  arma::mat nan = I3;
  nan(1, 1) = arma::datum::nan;
  arma::mat asym = 2 * I3;
  asym(0, 1) = 0.3;
  // Proposal: NaN, Inf, not square, empty, asymmetric, not positive definite, eigenvalue <= 1/2.
  EXPECT_THROW(DarkEstimator("d", nan), InvalidArgument);
  EXPECT_THROW(DarkEstimator("d", arma::mat(3, 3, arma::fill::value(arma::datum::inf))), InvalidArgument);
  EXPECT_THROW(DarkEstimator("d", arma::mat(3, 2, arma::fill::ones)), InvalidArgument);
  EXPECT_THROW(DarkEstimator("d", arma::mat()), InvalidArgument);
  EXPECT_THROW(DarkEstimator("d", asym), InvalidArgument);
  EXPECT_THROW(DarkEstimator("d", -I3), InvalidArgument);
  EXPECT_THROW(DarkEstimator("d", arma::diagmat(arma::vec{1.0, 2.0, 0.0})), InvalidArgument);
  EXPECT_THROW(DarkEstimator("d", 0.5 * I3), InvalidArgument);  // infinite variance, rejected
  // Covariance Lambda: NaN, not PSD, not square.
  EXPECT_THROW(optimal_proposal(nan), InvalidArgument);
  EXPECT_THROW(optimal_proposal(arma::diagmat(arma::vec{0.1, -0.1, 0.2})), InvalidArgument);
  EXPECT_THROW(optimal_proposal(arma::mat(2, 3, arma::fill::zeros)), InvalidArgument);
  // Dimension mismatches.
  EXPECT_THROW(dark_expected_variance(0.1 * I3, arma::eye(4, 4)), InvalidArgument);
  EXPECT_THROW(dark_log_joint_moment(0.1 * I3, arma::eye(4, 4), 1), InvalidArgument);
  EXPECT_THROW(dark_log_joint_moment(0.1 * I3, I3, 0), InvalidArgument);
  EXPECT_THROW(dark_expected_variance_mc(0.1 * I3, I3, {1, 0}), InvalidArgument);
  EXPECT_THROW(dark_expected_variance_mc(0.1 * I3, nan, {100, 0}), InvalidArgument);
  const DarkEstimator e("d", 2 * I3);
  const arma::mat X = test::points(3, 4, 0.3, 61), X4 = test::points(4, 4, 0.3, 62);
  EXPECT_THROW(e.log_var_over_k2(X, X4), InvalidArgument);
  EXPECT_THROW(e.log_var_over_k2(X4, X4), InvalidArgument);
  EXPECT_THROW(e.log_var_over_k2(arma::mat(3, 0), X), InvalidArgument);
  arma::mat Xn = X;
  Xn(0, 0) = arma::datum::nan;
  EXPECT_THROW(e.log_var_over_k2(Xn, X), InvalidArgument);
  Rng rng(1);
  EXPECT_THROW(e.draw(0, rng, Sampler::Iid), InvalidArgument);
  const Draw w = e.draw(3, rng, Sampler::Iid);
  EXPECT_THROW(e.features(w, X4, Side::Query), InvalidArgument);
  // Fitting from data: empty sets, mismatched dimensions, NaN.
  EXPECT_THROW(make_estimator("dark", arma::mat(3, 0), X), InvalidArgument);
  EXPECT_THROW(make_estimator("dark", X, X4), InvalidArgument);
  EXPECT_THROW(make_estimator("dark", Xn, X), InvalidArgument);
  EXPECT_THROW(pooled_second_moment(arma::mat(), X), InvalidArgument);
  EXPECT_THROW(fit_dark(X, X, {"whitened"}), InvalidArgument);
  // Mahalanobis PRF: non-PSD, NaN, empty factor, mismatched points.
  EXPECT_THROW(MahalanobisPrf::from_sigma(arma::diagmat(arma::vec{1.0, -0.5, 0.2})), InvalidArgument);
  EXPECT_THROW(MahalanobisPrf::from_sigma(nan), InvalidArgument);
  EXPECT_THROW(MahalanobisPrf::from_sigma(arma::zeros(3, 3)), InvalidArgument);
  EXPECT_THROW(MahalanobisPrf::from_factor(arma::mat()), InvalidArgument);
  EXPECT_THROW(MahalanobisPrf::from_factor(nan), InvalidArgument);
  const MahalanobisPrf prf = MahalanobisPrf::from_sigma(I3);
  EXPECT_THROW(prf.log_var_over_k2(X, X4), InvalidArgument);
  EXPECT_THROW(prf.log_kernel(Xn, X), InvalidArgument);
  EXPECT_THROW(prf.draw(0, rng, Sampler::Iid), InvalidArgument);
  EXPECT_THROW(prf.features(prf.draw(2, rng, Sampler::Iid), X4), InvalidArgument);
}

TEST(DarkStress, AnisoRegimeD64AllLogVariancesFinite) {
  // aniso regime, d = 64, geometric spectra up to condition number 1000, sigma chosen so the true
  // Lambda = sigma^2 Lambda0 has l_max = 0.35 (< 1/2: theory says every per-pair and expected variance
  // of dark is finite). L = 2000 points per set keep the estimated l_max below 1/2 (checked).
  const arma::uword d = 64, L = 2000;
  for (const char* spec : {"geometric:1", "geometric:10", "geometric:100", "geometric:1000"}) {
    const arma::vec spectrum = parse_spectrum(spec, d);
    const double sigma = std::sqrt(0.35 / spectrum.max());
    RegimeOptions opt;
    opt.spectrum = spec;
    const SetPair sp =
        draw_regime({.name = "aniso", .dim = d, .points = L, .sigma = sigma, .seed = 23, .options = opt});
    const arma::mat Lhat = pooled_second_moment(sp.X, sp.Y);
    ASSERT_LT(arma::eig_sym(Lhat).max(), 0.5) << spec;
    for (const char* name : {"dark", "dark-iso", "pos"}) {
      const auto e = make_estimator(name, sp.X, sp.Y);
      const arma::mat lv = e->log_var_over_k2(sp.X.cols(0, 499), sp.Y.cols(0, 499));
      EXPECT_TRUE(lv.is_finite()) << spec << " " << name;
    }
    // Expected variance at the estimated Lambda: finite for Sigma*, not for PosRF (l_max > 1/6).
    const OptimalProposal o = optimal_proposal(Lhat);
    const ExpectedVariance ev = dark_expected_variance(Lhat, o.Sigma);
    EXPECT_TRUE(ev.finite && std::isfinite(ev.log_variance)) << spec;
    EXPECT_FALSE(dark_expected_variance(Lhat, arma::eye(d, d)).finite) << spec;
  }
}
