// The cross-fitted control-variate mean (analysis/control_variate.hpp): unbiased against the known mean on a
// heavy-tailed x correlated with a control c of mean exactly 0, with a smaller variance than the plain mean.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/control_variate.hpp"
#include "core/rng.hpp"

using namespace kestrel;

TEST(ControlVariate, CrossFittedMeanIsUnbiasedAndReducesTheVariance) {
  // z ~ N(0, 1), u ~ N(0, 1): c = e^z - e^(1/2) (mean 0, lognormal: heavy right tail), x = e^z + u^2 (mean e^(1/2) +
  // 1). 4000 replications of 64 draws, two rows (the second with x = u^2 alone, where c carries no information).
  // The mean of the estimates must be within 4 standard errors of the truth (two-sided false-failure rate 6e-5 per
  // row under normality of the replication mean), and the first row's variance must be smaller than the plain mean's.
  constexpr std::size_t kReps = 4000, kDraws = 64;
  const double truth[2] = {std::exp(0.5) + 1, 1};
  double sum[2] = {0, 0}, sum2[2] = {0, 0}, plain2[2] = {0, 0};
  for (std::size_t rep = 0; rep < kReps; ++rep) {
    Rng rng(7, Stream::MonteCarlo, rep);
    ControlVariateSums s;
    for (std::size_t r = 0; r < kDraws; ++r) {
      const arma::vec g = rng.normal_matrix(2, 1);
      const double c = std::exp(g[0]) - std::exp(0.5);
      s.add(r, arma::vec{std::exp(g[0]) + g[1] * g[1], g[1] * g[1]}, arma::vec{c, c});
    }
    const auto e = s.estimate();
    for (int i = 0; i < 2; ++i) {
      sum[i] += e.mean[i];
      sum2[i] += e.mean[i] * e.mean[i];
      plain2[i] += std::pow(e.plain_mean[i] - truth[i], 2);
    }
  }
  for (int i = 0; i < 2; ++i) {
    const double mean = sum[i] / kReps, var = sum2[i] / kReps - mean * mean;
    EXPECT_NEAR(mean, truth[i], 4 * std::sqrt(var / kReps)) << "row " << i;
    if (i == 0) EXPECT_LT(var, 0.7 * plain2[i] / kReps) << "the control variate must reduce the variance";
  }
}

TEST(ControlVariate, SumsOfRunsAddUp) {
  // Two runs added equal one run over all draws (the parity of each draw's index picks its half).
  Rng rng(3, Stream::MonteCarlo, 0);
  const arma::mat x = arma::abs(rng.normal_matrix(3, 20)), c = rng.normal_matrix(3, 20);
  ControlVariateSums all, a, b;
  for (arma::uword r = 0; r < 20; ++r) {
    all.add(r, x.col(r), c.col(r));
    (r < 9 ? a : b).add(r, x.col(r), c.col(r));
  }
  a += b;
  const auto e1 = all.estimate(), e2 = a.estimate();
  EXPECT_LT(arma::abs(e1.mean - e2.mean).max(), 1e-12);
  EXPECT_LT(arma::abs(e1.se - e2.se).max(), 1e-12);
  EXPECT_EQ(a.draws(), 20.0);
}

TEST(ControlVariate, FewerThanFourDrawsPerHalfGiveThePlainMean) {
  // 7 draws (4 and 3 per half): the plain mean and SE, reduction 1; 8 draws (4 per half): the control variate.
  Rng rng(5, Stream::MonteCarlo, 0);
  const arma::mat z = rng.normal_matrix(2, 8);
  const arma::mat x = arma::exp(z), c = arma::exp(z) - std::exp(0.5);
  ControlVariateSums s;
  for (arma::uword r = 0; r < 7; ++r) s.add(r, x.col(r), c.col(r));
  const auto e = s.estimate();
  EXPECT_TRUE(arma::approx_equal(e.mean, e.plain_mean, "absdiff", 0));
  EXPECT_TRUE(arma::approx_equal(e.se, e.plain_se, "absdiff", 0));
  EXPECT_TRUE(arma::all(e.reduction == 1));
  s.add(7, x.col(7), c.col(7));
  const auto f = s.estimate();  // x = c + e^(1/2) exactly: the control variate leaves no variance
  EXPECT_LT(arma::abs(f.mean - std::exp(0.5)).max(), 1e-9);
  EXPECT_LT(f.se.max(), 1e-6 * f.plain_se.min());  // 0 up to the rounding of the sums of squares
}
