// Nadaraya-Watson classification: exact log scores against a direct sum, random-feature scores
// unbiased against the exact ones (Monte Carlo), and bad input.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/logmath.hpp"
#include "estimators/registry.hpp"
#include "tasks/classification.hpp"
#include "test_util.hpp"

using namespace kestrel;

TEST(Classification, ExactLogScoresEqualTheDirectSum) {
  const arma::mat train = test::points(4, 30, 1.0, 61), tst = test::points(4, 5, 1.0, 62);
  const arma::uvec labels = arma::regspace<arma::uvec>(0, 29) - 3 * (arma::regspace<arma::uvec>(0, 29) / 3);
  const arma::mat ls = nw_log_scores_exact(train, labels, 4, tst, 0.7);  // class 3 is empty
  for (arma::uword t = 0; t < 5; ++t) {
    for (arma::uword c = 0; c < 3; ++c) {
      double direct = 0;
      for (arma::uword i = 0; i < 30; ++i)
        if (labels(i) == c) direct += std::exp(-0.5 * 0.49 * arma::accu(arma::square(tst.col(t) - train.col(i))));
      EXPECT_NEAR(ls(c, t), std::log(direct), 1e-12) << c << " " << t;
    }
    EXPECT_EQ(ls(3, t), -kInf);
  }
  // Far-away test points (scores ~ e^-1000) are still ranked: the nearest class wins.
  arma::mat far = train.col(0) + 45.0;
  const arma::mat lf = nw_log_scores_exact(train, labels, 4, far, 1.0);
  EXPECT_TRUE(arma::is_finite(lf.rows(0, 2)));
  EXPECT_LT(lf.max(), -500.0);
}

TEST(Classification, RandomFeatureScoresAreUnbiased) {
  // Mean over 3000 draws of each score within 4.5 SE of the exact score.
  // 3 estimators x 3 classes x 4 test points = 36 checks at 4.5 SE: false-failure rate <= 2.5e-4.
  const arma::mat train = test::points(3, 24, 0.6, 63), tst = test::points(3, 4, 0.6, 64);
  const arma::uvec labels = arma::regspace<arma::uvec>(0, 23) / 8;
  const double sigma = 0.8;
  const arma::mat exact = arma::exp(nw_log_scores_exact(train, labels, 3, tst, sigma));
  for (const char* n : {"trig", "pos", "oprf"}) {
    const auto e = make_estimator(n, sigma * tst, sigma * train);
    const std::size_t R = 3000;
    arma::mat sum(3, 4, arma::fill::zeros), sum2(3, 4, arma::fill::zeros);
    for (std::size_t r = 0; r < R; ++r) {
      Rng rng(5, Stream::MonteCarlo, r);
      const arma::mat s = nw_scores_rf(*e, e->draw(16, rng, Sampler::Iid), train, labels, 3, tst, sigma);
      sum += s, sum2 += s % s;
    }
    const arma::mat mean = sum / R, se = arma::sqrt((sum2 / R - mean % mean) / (R - 1.0));
    for (arma::uword k = 0; k < mean.n_elem; ++k)
      EXPECT_LT(std::abs(mean(k) - exact(k)), test::kSigmas * se(k)) << n << " entry " << k;
  }
}

TEST(Classification, AccuracyAndBadInput) {
  EXPECT_DOUBLE_EQ(accuracy(arma::uvec{0, 1, 2, 2}, arma::uvec{0, 1, 1, 2}), 0.75);
  EXPECT_TRUE(arma::all(argmax_rows_per_column(arma::mat{{1.0, 5.0}, {3.0, 2.0}}) == arma::uvec{1, 0}));
  const arma::mat X = test::points(2, 4, 1.0, 1);
  EXPECT_THROW(nw_log_scores_exact(X, arma::uvec{0, 1, 2, 1}, 2, X, 1.0), InvalidArgument);  // label 2 >= 2
  EXPECT_THROW(nw_log_scores_exact(X, arma::uvec{0, 1}, 2, X, 1.0), InvalidArgument);        // 2 labels, 4 points
  EXPECT_THROW(nw_log_scores_exact(X, arma::uvec{0, 1, 0, 1}, 2, X, 0.0), InvalidArgument);  // sigma
  EXPECT_THROW(nw_log_scores_exact(X, arma::uvec{0, 1, 0, 1}, 2, test::points(3, 2, 1, 2), 1.0), InvalidArgument);
  EXPECT_THROW(accuracy(arma::uvec{}, arma::uvec{}), InvalidArgument);
}
