// Exact variance formulas against the Monte Carlo simulator (unbiasedness and variance), for every
// estimator of the GERF family and the real TrigRF, plus determinism across thread counts.
// Threshold: |empirical - exact| < 4.5 standard errors (test_util.hpp); the number of checks per test
// and the resulting false-failure bound (union bound, normal approximation) are stated per test.
#include <gtest/gtest.h>

#include <oneapi/tbb/global_control.h>

#include "analysis/montecarlo.hpp"
#include "analysis/pairwise.hpp"
#include "core/error.hpp"
#include "estimators/gerf/gerf.hpp"
#include "estimators/registry.hpp"
#include "estimators/trig/trig_real.hpp"
#include "test_util.hpp"

using namespace kestrel;
using cplx = std::complex<double>;

namespace {

std::vector<std::unique_ptr<Estimator>> all_cases(const arma::mat& X, const arma::mat& Y) {
  std::vector<std::unique_ptr<Estimator>> v;
  for (const char* n : {"trig", "trig-real", "pos", "oprf", "gerf"}) v.push_back(make_estimator(n, X, Y));
  // General complex-A paths for both s (finite 8th moment: Re(1 - 32A) > 0, so the SE is reliable).
  v.push_back(std::make_unique<GerfEstimator>("gerf-neg", X.n_rows, GerfParams{cplx(0.02, 0.03), -1}));
  v.push_back(std::make_unique<GerfEstimator>("gerf-pos", X.n_rows, GerfParams{cplx(-0.05, 0.02), 1}));
  return v;
}

}  // namespace

TEST(MonteCarlo, ExactVarianceMatchesSimulationSoftmax) {
  // 7 estimators x 9 entries x 2 checks = 126 checks at 4.5 se: false-failure rate <= 9e-4.
  const arma::mat X = test::points(3, 3, 0.35, 11), Y = test::points(3, 3, 0.35, 12);
  for (const auto& e : all_cases(X, Y)) {
    const MonteCarloResult r = simulate(*e, Kernel::softmax(), X, Y, {20000, 1, 101, Sampler::Iid});
    test::expect_moments(*e, Kernel::softmax(), X, Y, r);
  }
}

TEST(MonteCarlo, ExactVarianceMatchesSimulationGaussianKernelAndMFeatures) {
  // Gaussian kernel (alpha = -1/2) and M = 4 features: Var_M = Var_1 / M.
  // 7 estimators x 4 entries x 2 checks = 56 checks at 4.5 se: false-failure rate <= 4e-4.
  const arma::mat X = test::points(4, 2, 0.3, 13), Y = test::points(4, 2, 0.3, 14) + 0.1;
  for (const auto& e : all_cases(X, Y)) {
    const MonteCarloResult r = simulate(*e, Kernel::gaussian(), X, Y, {8000, 4, 102, Sampler::Iid});
    test::expect_moments(*e, Kernel::gaussian(), X, Y, r);
  }
}

TEST(MonteCarlo, VarianceCheckHasPowerAgainstA25PercentError) {
  // Negative control: the same threshold rejects a variance formula that is 25% off, so the checks
  // above are not vacuous: for each estimator most of the 9 entries must reject it.
  const arma::mat X = test::points(3, 3, 0.35, 11), Y = test::points(3, 3, 0.35, 12);
  for (const char* n : {"trig", "pos", "oprf"}) {
    const auto e = make_estimator(n, X, Y);
    const MonteCarloResult r = simulate(*e, Kernel::softmax(), X, Y, {20000, 1, 101, Sampler::Iid});
    const arma::mat wrong = 1.25 * arma::exp(log_variance(*e, Kernel::softmax(), X, Y));
    const arma::mat z = arma::abs(r.kernel.variance - wrong) / r.kernel.se_variance;
    // PosRF's heavy tails make the SE large on some entries, so require a majority, not all.
    EXPECT_GE(arma::accu(z > test::kSigmas), 5u) << n << ": z = " << z.t();
  }
}

TEST(MonteCarlo, KernelTimesCIsUnbiased) {
  // 7 estimators x (4 x 2) entries of K C = 56 checks at 4.5 se: false-failure rate <= 4e-4.
  const arma::mat X = test::points(3, 4, 0.4, 15), Y = test::points(3, 5, 0.4, 16), C = test::points(5, 2, 1.0, 17);
  for (const auto& e : all_cases(X, Y)) {
    const MonteCarloResult r = simulate(*e, Kernel::softmax(), X, Y, {4000, 2, 103, Sampler::Iid}, &C);
    ASSERT_TRUE(r.kernel_times.has_value());
    const auto& m = *r.kernel_times;
    for (arma::uword i = 0; i < m.mean.n_elem; ++i)
      EXPECT_LT(std::abs(m.mean(i) - m.exact(i)), test::kSigmas * m.se_mean(i)) << e->info().name << " entry " << i;
  }
}

TEST(MonteCarlo, OrthogonalProjectionsStayUnbiasedForAxisAlignedInputs) {
  // GUIDE trap: a plain QR gives Q(0,0) <= 0 and biases positive features on axis-aligned inputs.
  // 2 estimators x 1 entry = 2 checks at 4.5 se: false-failure rate <= 2e-5.
  arma::mat X(4, 1, arma::fill::zeros), Y(4, 1, arma::fill::zeros);
  X(0, 0) = 0.8;
  Y(0, 0) = 0.6;
  for (const char* n : {"pos", "oprf"}) {
    const auto e = make_estimator(n, X, Y);
    const MonteCarloResult r = simulate(*e, Kernel::softmax(), X, Y, {20000, 4, 104, Sampler::Orthogonal});
    EXPECT_LT(std::abs(r.kernel.mean(0) - r.kernel.exact(0)), test::kSigmas * r.kernel.se_mean(0))
        << n << ": mean " << r.kernel.mean(0) << " vs " << r.kernel.exact(0);
  }
}

TEST(MonteCarlo, TrigRealSignOfDerfEq5IsWrongAsPrinted) {
  // With the printed cos(-w^T y + theta) the estimator targets exp(-x^T y): check the corrected form
  // separates the two (x^T y = 0.5, so the two targets differ by e^1) and hits exp(+x^T y).
  arma::mat X(2, 1, arma::fill::zeros), Y(2, 1, arma::fill::zeros);
  X(0, 0) = 1.0;
  Y(0, 0) = 0.5;
  const auto e = make_estimator("trig-real", X, Y);
  const MonteCarloResult r = simulate(*e, Kernel::softmax(), X, Y, {40000, 1, 105, Sampler::Iid});
  EXPECT_LT(std::abs(r.kernel.mean(0) - std::exp(0.5)), test::kSigmas * r.kernel.se_mean(0));
  EXPECT_GT(std::abs(r.kernel.mean(0) - std::exp(-0.5)), 10 * r.kernel.se_mean(0));
}

TEST(Determinism, IdenticalForOneAndTwoThreads) {
  const arma::mat X = test::points(6, 300, 0.5, 18), Y = test::points(6, 280, 0.5, 19);
  const auto e = make_estimator("gerf", X, Y);
  auto run = [&](int threads) {
    tbb::global_control c(tbb::global_control::max_allowed_parallelism, threads);
    const PairwiseSummary s = summarize_exact_variance(*e, Kernel::softmax(), X, Y, 64);
    const MonteCarloResult r =
        simulate(*e, Kernel::softmax(), X.cols(0, 19), Y.cols(0, 19), {200, 3, 7, Sampler::Orthogonal});
    return std::make_tuple(s.log_var.mean, s.log_var.m2, s.log_rel_var.mean, r.kernel.mean, r.kernel.variance);
  };
  const auto a = run(1), b = run(2);
  EXPECT_EQ(std::get<0>(a), std::get<0>(b));
  EXPECT_EQ(std::get<1>(a), std::get<1>(b));
  EXPECT_EQ(std::get<2>(a), std::get<2>(b));
  EXPECT_TRUE(arma::approx_equal(std::get<3>(a), std::get<3>(b), "absdiff", 0.0));
  EXPECT_TRUE(arma::approx_equal(std::get<4>(a), std::get<4>(b), "absdiff", 0.0));
}

TEST(Approximation, KernelTimesEqualsDenseProductOfTheSameDraw) {
  // P (S^T C) is the same number as (P S^T) C up to rounding, for real and complex features.
  const arma::mat X = test::points(5, 30, 0.5, 31), Y = test::points(5, 20, 0.5, 32), C = test::points(20, 3, 1, 33);
  for (const char* n : {"trig", "pos", "oprf", "trig-real"}) {
    const auto e = make_estimator(n, X, Y);
    Rng rng(9);
    const Draw w = e->draw(16, rng, Sampler::Orthogonal);
    const arma::mat dense = approximate_kernel(*e, w, X, Y, Kernel::gaussian()) * C;
    const arma::mat lowrank = approximate_kernel_times(*e, w, X, Y, C, Kernel::gaussian());
    EXPECT_LT(arma::abs(dense - lowrank).max(), 1e-12 * arma::abs(dense).max()) << n;
  }
}

TEST(MonteCarlo, BadInput) {
  const arma::mat X = test::points(3, 2, 0.3, 1);
  const auto e = make_estimator("pos", X, X);
  EXPECT_THROW(simulate(*e, Kernel::softmax(), X, X, {3, 1, 0, Sampler::Iid}), InvalidArgument);
  EXPECT_THROW(simulate(*e, Kernel::softmax(), X, X, {10, 0, 0, Sampler::Iid}), InvalidArgument);
  const arma::mat C(5, 1, arma::fill::ones);
  EXPECT_THROW(simulate(*e, Kernel::softmax(), X, X, {10, 1, 0, Sampler::Iid}, &C), InvalidArgument);
  EXPECT_THROW(simulate(*e, Kernel::softmax(), arma::mat(3, 0), X, {10, 1, 0, Sampler::Iid}), InvalidArgument);
}

TEST(MonteCarlo, SharedDrawsGiveEachEstimatorsOwnResultBitForBit) {
  // The GERF family draws alike: simulate_shared equals one simulate() per estimator, for both coupled samplers.
  const arma::mat X = test::points(6, 3, 0.5, 41), Y = test::points(6, 2, 0.5, 42);
  std::vector<std::unique_ptr<Estimator>> owned;
  std::vector<const Estimator*> es;
  for (const char* n : {"pos", "oprf", "gerf", "trig"}) es.push_back(owned.emplace_back(make_estimator(n, X, Y)).get());
  for (const Sampler smp : {Sampler::Orthogonal, Sampler::Simplex}) {
    const MonteCarloOptions o{64, 6, 5, smp};
    const auto shared = simulate_shared(es, Kernel::gaussian(), X, Y, o);
    ASSERT_EQ(shared.size(), es.size());
    for (std::size_t q = 0; q < es.size(); ++q) {
      const MonteCarloResult alone = simulate(*es[q], Kernel::gaussian(), X, Y, o);
      EXPECT_TRUE(arma::approx_equal(shared[q].kernel.mean, alone.kernel.mean, "absdiff", 0.0)) << q;
      EXPECT_TRUE(arma::approx_equal(shared[q].kernel.variance, alone.kernel.variance, "absdiff", 0.0)) << q;
      EXPECT_TRUE(arma::approx_equal(shared[q].kernel.se_variance, alone.kernel.se_variance, "absdiff", 0.0)) << q;
    }
  }
  // TrigRF in its real form also draws phases: refused, not silently given another estimator's draws.
  const auto real = make_estimator("trig-real", X, Y);
  try {
    simulate_shared({es[0], real.get()}, Kernel::gaussian(), X, Y, {64, 6, 5, Sampler::Iid});
    FAIL() << "estimators that draw differently were simulated on shared draws";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("draw differently"), std::string::npos) << e.what();
  }
}
