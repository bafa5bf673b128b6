// Nadaraya-Watson classification: exact log scores against a direct sum, random-feature scores
// unbiased against the exact ones (Monte Carlo), and bad input.
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include "core/error.hpp"
#include "core/logmath.hpp"
#include "estimators/discrete/discrete.hpp"
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

TEST(Classification, ScaledFeaturesAddTheScaleInsideTheExponent) {
  // For every family that applies its own row scale: equal to features * exp(scale) where nothing overflows ...
  const arma::mat X = test::points(3, 6, 0.3, 71), Y = test::points(3, 6, 0.3, 72);  // DARK needs Lambda < 1/2
  const arma::vec scale = {-3.0, -1.0, 0.0, 0.5, 2.0, -0.25};
  for (const char* n : {"trig", "trig-real", "pos", "gerf", "oprf", "aderf", "sderf", "saderf", "dark", "pois", "geom",
                        "pois+", "geom+"}) {
    const auto e = make_estimator(n, X, Y);
    Rng rng(3, Stream::Features, 0);
    const Draw w = e->draw(8, rng, Sampler::Iid);
    for (Side side : {Side::Query, Side::Key}) {
      arma::mat ref = e->features(w, X, side);
      ref.each_col() %= arma::exp(scale);
      const arma::mat got = e->features(w, X, side, scale);
      EXPECT_LT(arma::abs(got - ref).max(), 1e-12 * arma::abs(ref).max()) << n;
    }
  }
  // ... and finite where the product would be inf * 0: the Gaussian kernel at |x|^2 = 3000 (exp(1500) on the softmax
  // side). TrigRF's Gaussian features are then exactly exp(i w^T x) / sqrt(M), of modulus 1 / sqrt(M).
  const arma::mat far = test::points(3, 5, 1.0, 73) * 40.0;
  const auto trig = make_estimator("trig", far, far);
  Rng rng(4, Stream::Features, 0);
  const Draw w = trig->draw(8, rng, Sampler::Iid);
  const arma::mat F = feature_map(*trig, w, far, Side::Query, Kernel::gaussian());
  const arma::mat mod = arma::sqrt(arma::square(F.cols(0, 7)) + arma::square(F.cols(8, 15)));
  EXPECT_LT(arma::abs(mod - 1.0 / std::sqrt(8.0)).max(), 1e-12);
  for (const char* n : {"pos", "oprf", "sderf", "pois", "geom+"}) {
    const auto e = make_estimator(n, far, far);
    Rng r2(4, Stream::Features, 1);
    EXPECT_TRUE(feature_map(*e, e->draw(8, r2, Sampler::Iid), far, Side::Key, Kernel::gaussian()).is_finite()) << n;
  }
}

TEST(Classification, PlusVariantsTakeTheirShiftFromTheTrainingSetOnly) {
  const arma::mat T = test::points(3, 20, 1.0, 74);
  const arma::mat Q = T.cols(0, 4) - 3.0;  // below every training coordinate: clamped, never used for the shift
  for (const char* n : {"pois+", "geom+"}) {
    const auto e = fit_for_classification(n, Q, T);
    const auto& shift = dynamic_cast<const DiscreteEstimator&>(*e).shift();
    ASSERT_TRUE(shift.has_value()) << n;
    EXPECT_TRUE(arma::approx_equal(shift->c, arma::min(T, 1) - 1e-8, "absdiff", 1e-15)) << n;
  }
  // Other families are fitted by the registry on (Q, T).
  EXPECT_EQ(fit_for_classification("oprf", Q, T)->info().name, "oprf");
}

namespace {
// Two well-separated Gaussian blobs in d = 2, cut into train / validation / test.
LabeledSplit blobs(std::uint64_t seed) {
  auto part = [&](arma::uword n, std::uint64_t s, arma::uvec& lab) {
    arma::mat X = test::points(2, n, 0.3, s);
    lab = arma::regspace<arma::uvec>(0, n - 1) - 2 * (arma::regspace<arma::uvec>(0, n - 1) / 2);
    for (arma::uword i = 0; i < n; ++i) X(0, i) += lab(i) == 1 ? 1.5 : -1.5;
    return X;
  };
  LabeledSplit s;
  s.n_classes = 2;
  s.train = part(60, seed, s.train_labels);
  s.validation = part(20, seed + 1, s.validation_labels);
  s.test = part(20, seed + 2, s.test_labels);
  return s;
}
}  // namespace

TEST(Classification, ProtocolSeparatesBlobsAndIsDeterministic) {
  const LabeledSplit s = blobs(80);
  NwOptions o{.sigmas = {0.3, 1.0}, .seeds = 6, .M = 32, .seed = 9};
  const NwResult ex = nw_protocol_exact(s, o);
  EXPECT_DOUBLE_EQ(ex.test_mean(), 1.0);  // blobs 3 apart with spread 0.3: the Bayes error is ~e^-25
  EXPECT_EQ(ex.best, 0u);                 // both sigmas classify everything: the smaller wins the tie
  for (const char* n : {"pos", "oprf", "pois+"}) {
    const NwResult a = nw_protocol_rf(n, s, o);
    EXPECT_EQ(a.test_accuracy.n_elem, 6u);
    EXPECT_EQ(a.validation_accuracy.n_rows, 6u);
    // Positive Gaussian features separate the blobs; PoisRF+ is only checked for determinism (it reaches ~0.8 here).
    if (std::string(n) != "pois+") {
      EXPECT_GT(a.test_mean(), 0.9) << n;
    }
    // Same seed, same numbers, for 1 and 2 threads.
    tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
    const NwResult b = nw_protocol_rf(n, s, o);
    EXPECT_TRUE(arma::approx_equal(a.validation_accuracy, b.validation_accuracy, "absdiff", 0.0)) << n;
    EXPECT_TRUE(arma::approx_equal(a.test_accuracy, b.test_accuracy, "absdiff", 0.0)) << n;
  }
  // Complex TrigRF draws M / 2 omegas: the same number of real feature columns.
  EXPECT_EQ(nw_protocol_rf("trig", s, o).omegas, 16u);
}

TEST(Classification, ProtocolBadInput) {
  const LabeledSplit s = blobs(90);
  EXPECT_THROW(nw_protocol_exact(s, NwOptions{.sigmas = {}}), InvalidArgument);
  EXPECT_THROW(nw_protocol_exact(s, NwOptions{.sigmas = {1.0, -2.0}}), InvalidArgument);
  EXPECT_THROW(nw_protocol_rf("pos", s, NwOptions{.seeds = 0}), InvalidArgument);
  EXPECT_THROW(nw_protocol_rf("pos", s, NwOptions{.M = 1}), InvalidArgument);
  EXPECT_THROW(nw_protocol_rf("nope", s, NwOptions{.seeds = 1}), InvalidArgument);
  LabeledSplit bad = s;
  bad.test = test::points(3, 4, 1.0, 5);
  bad.test_labels = arma::uvec{0, 1, 0, 1};
  EXPECT_THROW(nw_protocol_exact(bad, NwOptions{}), InvalidArgument);
  bad = s;
  bad.validation_labels(0) = 2;
  EXPECT_THROW(nw_protocol_exact(bad, NwOptions{}), InvalidArgument);
}

TEST(Classification, StabilisedPredictionsEqualTheArgmaxOfTheScores) {
  // Where nothing overflows, nw_predict_rf predicts argmax of the unbiased scores of nw_scores_rf (the stabiliser
  // multiplies each query's scores by a positive factor) ...
  const LabeledSplit s = blobs(100);
  for (const char* n : {"pos", "oprf", "sderf", "aderf", "trig", "geom"}) {
    const auto e = fit_for_classification(n, 0.8 * s.test, 0.8 * s.train);
    Rng rng(8, Stream::Features, 0);
    const Draw w = e->draw(16, rng, Sampler::Orthogonal);
    const arma::uvec direct = argmax_rows_per_column(nw_scores_rf(*e, w, s.train, s.train_labels, 2, s.test, 0.8));
    EXPECT_TRUE(arma::all(nw_predict_rf(*e, w, s.train, s.train_labels, 2, s.test, 0.8) == direct)) << n;
  }
  // ... and at sigma = 100, where ADERF's features exceed double range (log-features ~ 1e4), it still predicts without
  // overflow. The dynamic range of such kernels (e^-5000 between neighbours) is beyond double precision: after the
  // global key shift only keys near the largest one survive, so some queries get all-zero scores; they are counted.
  const auto e = fit_for_classification("aderf", 100 * s.test, 100 * s.train);
  Rng rng(9, Stream::Features, 0);
  const Draw w = e->draw(64, rng, Sampler::Orthogonal);
  EXPECT_THROW(nw_scores_rf(*e, w, s.train, s.train_labels, 2, s.test, 100.0), NumericalError);
  arma::uword all_zero = 99;
  const arma::uvec pred = nw_predict_rf(*e, w, s.train, s.train_labels, 2, s.test, 100.0, &all_zero);
  EXPECT_LT(all_zero, s.test.n_cols);  // the stabiliser keeps the signal of at least the queries near the top key
  EXPECT_EQ(pred.n_elem, s.test.n_cols);
}
