// Tests of exact and random-feature softmax attention (CRT eq. 3, lib/tasks/attention.hpp): the
// streaming exact attention against a naive reference, unbiasedness of the numerator and normaliser
// estimates (Monte Carlo), the stabiliser, positivity of normalisers, bad inputs, thread counts; causal attention is
// the masked definition (each row over its prefix of keys), exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <oneapi/tbb/global_control.h>

#include "core/error.hpp"
#include "estimators/registry.hpp"
#include "tasks/attention.hpp"
#include "test_util.hpp"

namespace kestrel {
namespace {

using test::kSigmas;
using test::points;

// Naive O(Lq Lk) reference: the full matrix of logits, each row shifted by its max before exp.
ExactAttention naive_attention(const arma::mat& Q, const arma::mat& K, const arma::mat& V) {
  arma::mat Z = attention_scaled(Q).t() * attention_scaled(K);
  const arma::vec mx = arma::max(Z, 1);
  Z.each_col() -= mx;
  const arma::mat A = arma::exp(Z);
  const arma::vec s = arma::sum(A, 1);
  arma::mat Y = A * V;
  Y.each_col() /= s;
  return {Y, mx + arma::log(s)};
}

arma::mat values(arma::uword L, arma::uword dv, std::uint64_t seed) { return points(dv, L, 1.0, seed).t(); }

// Estimates of (A 1)_i and (A V)_i in absolute terms, relative to the exact normaliser exp(log D_i):
// D_hat_i / D_i and N_hat_i / D_i.
arma::vec normaliser_ratio(const ApproxAttention& a, const ExactAttention& ex) {
  return a.normaliser % arma::exp(a.log_scale - ex.log_normaliser);
}
arma::mat numerator_ratio(const ApproxAttention& a, const ExactAttention& ex) {
  arma::mat n = a.numerator;
  n.each_col() %= arma::exp(a.log_scale - ex.log_normaliser);
  return n;
}

TEST(Attention, ExactMatchesNaiveReference) {
  // Several key blocks (300 keys, block 64) and, at scale 20, logits beyond 709, where a
  // plain exp of the logits would overflow but the streaming log-sum-exp must not.
  for (double scale : {0.5, 20.0}) {
    const arma::mat Q = points(5, 7, scale, 1), K = points(5, 300, scale, 2), V = values(300, 3, 3);
    const ExactAttention ex = exact_attention(Q, K, V, 64), ref = naive_attention(Q, K, V);
    ASSERT_TRUE(ex.Y.is_finite() && ex.log_normaliser.is_finite()) << "scale " << scale;
    EXPECT_LT(arma::abs(ex.Y - ref.Y).max(), 1e-12 * (1 + arma::abs(ref.Y).max())) << "scale " << scale;
    EXPECT_LT(arma::abs(ex.log_normaliser - ref.log_normaliser).max(),
              1e-12 * (1 + arma::abs(ref.log_normaliser).max()))
        << "scale " << scale;
    if (scale > 1) {
      EXPECT_GT(ref.log_normaliser.max(), 709.0) << "the large case must exceed double range";
    }
  }
  // Exact attention of a single key is that key's value row, for every query.
  const arma::mat V1 = values(1, 4, 4);
  const ExactAttention one = exact_attention(points(3, 5, 1.0, 5), points(3, 1, 1.0, 6), V1);
  for (arma::uword i = 0; i < 5; ++i) EXPECT_LT(arma::abs(one.Y.row(i) - V1.row(0)).max(), 1e-14);
}

// The Monte Carlo means of the numerator and normaliser estimates equal A V and A 1: per entry
// |mean - exact| < 4.5 SE. 8 estimators x 5 queries x (1 + 2) entries = 120 checks; with P(|Z| > 4.5) =
// 6.8e-6 per check the false-failure rate is below 1e-3 (inputs are small, so the estimates have all
// moments and the CLT applies at 3000 draws). Negative control: the same threshold rejects a target 25%
// off for the normaliser of PosRF.
TEST(Attention, NumeratorAndNormaliserAreUnbiased) {
  const arma::mat Q = points(4, 5, 0.6, 11), K = points(4, 6, 0.6, 12), V = values(6, 2, 13);
  const ExactAttention ex = exact_attention(Q, K, V);
  arma::mat exact_num = ex.Y;  // (A V)_i / D_i = Y_i
  const std::size_t R = 3000;
  const arma::uword M = 8;
  for (const std::string name : {"pos", "oprf", "sderf", "saderf", "dark", "trig", "trig-real", "hrf-angular"}) {
    const auto e = fit_attention_estimator(name, Q, K);
    arma::vec s1(5, arma::fill::zeros), s2(5, arma::fill::zeros);
    arma::mat n1(5, 2, arma::fill::zeros), n2(5, 2, arma::fill::zeros);
    for (std::size_t r = 0; r < R; ++r) {
      Rng rng(77, Stream::MonteCarlo, r);
      const Draw w = e->draw(M, rng, Sampler::Iid);
      const ApproxAttention a = approximate_attention(*e, w, Q, K, V);
      const arma::vec dn = normaliser_ratio(a, ex);
      const arma::mat nn = numerator_ratio(a, ex);
      s1 += dn, s2 += arma::square(dn), n1 += nn, n2 += arma::square(nn);
    }
    const arma::vec mean = s1 / R, se = arma::sqrt((s2 / R - arma::square(mean)) / (R - 1));
    const arma::mat nmean = n1 / R, nse = arma::sqrt((n2 / R - arma::square(nmean)) / (R - 1));
    for (arma::uword i = 0; i < 5; ++i) {
      EXPECT_LT(std::abs(mean(i) - 1.0), kSigmas * se(i)) << name << " normaliser of query " << i << ", seed 77";
      for (arma::uword c = 0; c < 2; ++c)
        EXPECT_LT(std::abs(nmean(i, c) - exact_num(i, c)), kSigmas * nse(i, c))
            << name << " numerator (" << i << ", " << c << "), seed 77";
    }
    if (name == "pos") {
      arma::uword rejected = 0;
      for (arma::uword i = 0; i < 5; ++i) rejected += std::abs(mean(i) - 1.25) >= kSigmas * se(i);
      EXPECT_EQ(rejected, 5u) << "the threshold must reject a normaliser 25% off";
    }
  }
}

// Where nothing over- or underflows, the stabiliser changes nothing but rounding.
TEST(Attention, StabiliserDoesNotChangeTheResult) {
  const arma::mat Q = points(8, 40, 0.8, 21), K = points(8, 50, 0.8, 22), V = values(50, 3, 23);
  for (const std::string name : {"pos", "oprf", "aderf", "sderf", "saderf", "dark", "pos-hyp"}) {
    const auto e = fit_attention_estimator(name, Q, K);
    Rng rng(5, Stream::Features, 0);
    const Draw w = e->draw(32, rng, Sampler::Iid);
    const ApproxAttention s = approximate_attention(*e, w, Q, K, V, {.stabilise = true});
    const ApproxAttention u = approximate_attention(*e, w, Q, K, V, {.stabilise = false});
    EXPECT_TRUE(arma::any(s.log_scale != 0.0)) << name << ": the stabiliser was not applied";
    EXPECT_TRUE(arma::all(u.log_scale == 0.0)) << name;
    EXPECT_LT(arma::abs(s.Y - u.Y).max(), 1e-12 * arma::abs(u.Y).max()) << name;
    const arma::vec ds = s.normaliser % arma::exp(s.log_scale);
    EXPECT_LT(arma::abs(ds - u.normaliser).max(), 1e-12 * arma::abs(u.normaliser).max()) << name;
  }
}

// Queries mu + noise and keys -mu + noise with |mu'| = 60 after the d^(1/4) scaling: every PosRF or
// OPRF feature is about exp(-|mu'|^2/2) = e^-1800 and underflows to 0, so without the stabiliser the
// normalisers are 0 (NumericalError). x' + y' is small, so the estimators are accurate: with the
// stabiliser the normaliser estimate divided by the exact one has Monte Carlo mean 1 within 4.5 SE
// (4 estimators x 6 queries = 24 checks, false-failure rate < 2e-4), and Y is close to exact.
TEST(Attention, StabiliserKeepsOverflowingInputsFiniteAndCorrect) {
  const arma::uword d = 16;
  arma::vec mu(d, arma::fill::zeros);
  mu(0) = 120.0;  // |mu'| = 120 / 16^(1/4) = 60
  arma::mat Q = points(d, 6, 0.5, 31), K = points(d, 40, 0.5, 32);
  Q.each_col() += mu;
  K.each_col() -= mu;
  const arma::mat V = values(40, 2, 33);
  const ExactAttention ex = exact_attention(Q, K, V);
  for (const std::string name : {"pos", "oprf", "sderf", "saderf"}) {
    const auto e = fit_attention_estimator(name, Q, K);
    if (name == "pos" || name == "oprf") {
      Rng rng(3, Stream::Features, 0);
      const Draw w = e->draw(64, rng, Sampler::Iid);
      EXPECT_THROW(approximate_attention(*e, w, Q, K, V, {.stabilise = false}), NumericalError) << name;
    }
    const std::size_t R = 400;
    arma::vec s1(6, arma::fill::zeros), s2(6, arma::fill::zeros);
    double y_err = 0;
    for (std::size_t r = 0; r < R; ++r) {
      Rng rng(9, Stream::MonteCarlo, r);
      const Draw w = e->draw(64, rng, Sampler::Iid);
      const ApproxAttention a = approximate_attention(*e, w, Q, K, V);
      ASSERT_TRUE(a.Y.is_finite() && a.normaliser.is_finite() && a.log_scale.is_finite()) << name;
      const arma::vec ratio = normaliser_ratio(a, ex);
      s1 += ratio, s2 += arma::square(ratio);
      y_err += relative_error(a.Y, ex.Y) / R;
    }
    const arma::vec mean = s1 / R, se = arma::sqrt((s2 / R - arma::square(mean)) / (R - 1));
    for (arma::uword i = 0; i < 6; ++i)
      EXPECT_LT(std::abs(mean(i) - 1.0), kSigmas * se(i)) << name << " query " << i << ", seed 9";
    // |x' + y'|^2 is about 2, so one feature's relative variance is about e^2 - 1 and the relative error
    // of Y at M = 64 is a few tenths; a broken stabiliser gives errors of order 1 or NaN.
    EXPECT_LT(y_err, 0.6) << name;
  }
}

TEST(Attention, PositiveEstimatorsNeverGiveNonPositiveNormalisers) {
  // Isotropic inputs at logit scale ~1, M = 4: small M makes trig's normalisers often negative, while
  // positive estimators' normalisers are sums of positive products.
  const arma::mat Q = points(16, 60, 1.0, 41), K = points(16, 60, 1.0, 42), V = values(60, 2, 43);
  for (const std::string name : {"pos", "oprf", "aderf", "sderf", "saderf", "dark", "pos-hyp", "trig"}) {
    const auto e = fit_attention_estimator(name, Q, K);
    arma::uword non_positive = 0;
    for (std::size_t r = 0; r < 50; ++r) {
      Rng rng(4, Stream::MonteCarlo, r);
      const ApproxAttention a = approximate_attention(*e, e->draw(4, rng, Sampler::Iid), Q, K, V);
      non_positive += arma::accu(a.normaliser <= 0.0);
    }
    if (name == "trig")
      EXPECT_GT(non_positive, 0u) << "trig at M = 4 is expected to give some negative normalisers";
    else
      EXPECT_EQ(non_positive, 0u) << name;
  }
}

TEST(Attention, BadInputsThrow) {
  const arma::mat Q = points(3, 4, 1.0, 1), K = points(3, 5, 1.0, 2), V = values(5, 2, 3);
  EXPECT_THROW(exact_attention(Q, points(4, 5, 1.0, 2), V), InvalidArgument);  // dims differ
  EXPECT_THROW(exact_attention(arma::mat(3, 0), K, V), InvalidArgument);       // L = 0
  EXPECT_THROW(exact_attention(Q, arma::mat(3, 0), arma::mat(0, 2)), InvalidArgument);
  EXPECT_THROW(exact_attention(Q, K, values(4, 2, 3)), InvalidArgument);  // V rows != keys
  EXPECT_THROW(exact_attention(Q, K, arma::mat(5, 0)), InvalidArgument);  // dv = 0
  EXPECT_THROW(exact_attention(Q, K, V, 0), InvalidArgument);             // block = 0
  arma::mat Qnan = Q, Vnan = V;
  Qnan(1, 2) = std::nan("");
  Vnan(0, 1) = std::numeric_limits<double>::infinity();
  EXPECT_THROW(exact_attention(Qnan, K, V), InvalidArgument);
  EXPECT_THROW(exact_attention(Q, K, Vnan), InvalidArgument);
  const auto e = fit_attention_estimator("oprf", Q, K);
  Rng rng(1);
  EXPECT_THROW(e->draw(0, rng, Sampler::Iid), InvalidArgument);  // M = 0
  const Draw w = e->draw(4, rng, Sampler::Iid);
  EXPECT_THROW(approximate_attention(*e, w, Qnan, K, V), InvalidArgument);
  EXPECT_THROW(approximate_attention(*e, w, Q, K, Vnan), InvalidArgument);
  EXPECT_THROW(approximate_attention(*e, w, points(4, 4, 1.0, 1), points(4, 5, 1.0, 2), V), InvalidArgument);
  EXPECT_THROW(fit_attention_estimator("nope", Q, K), InvalidArgument);
  EXPECT_THROW(fit_attention_estimator("pos", Qnan, K), InvalidArgument);
  // A non-positive estimator has no log-features.
  const auto t = fit_attention_estimator("trig", Q, K);
  EXPECT_THROW(t->log_features(t->draw(4, rng, Sampler::Iid), Q, Side::Query), InvalidArgument);
}

// Causal attention (a decoder's mask): row r of the causal functions equals the bidirectional ones on keys
// 0..positions(r), the random-feature one with the same draw (its prefix sums are the sums over the prefix), for a
// positive estimator (stabilised: the key scale is global there and per prefix here, and cancels), a complex one and
// a hybrid; positions in any order, repeated, first and last. Exact up to rounding (1e-12).
TEST(Attention, CausalIsEachRowOverItsPrefixOfKeys) {
  const arma::mat Q = points(6, 7, 0.7, 61), K = points(6, 40, 0.7, 62), V = values(40, 3, 63);
  const arma::uvec pos = {17, 0, 39, 5, 17, 30, 1};
  const ExactAttention ex = exact_causal_attention(Q, pos, K, V);
  for (const std::string name : {"pos", "trig", "hrf-angular"}) {
    const auto e = fit_attention_estimator(name, Q, K);
    Rng rng(64);
    const Draw w = e->draw(24, rng, Sampler::Iid);
    const ApproxAttention a = approximate_causal_attention(*e, w, Q, pos, K, V);
    for (arma::uword r = 0; r < pos.n_elem; ++r) {
      const arma::uword p = pos(r);
      const ApproxAttention one = approximate_attention(*e, w, Q.col(r), K.cols(0, p), V.rows(0, p));
      EXPECT_LT(arma::abs(a.Y.row(r) - one.Y).max(), 1e-12 * (1 + arma::abs(one.Y).max())) << name << " row " << r;
      if (name == "pos") continue;
      const ExactAttention x = naive_attention(Q.col(r), K.cols(0, p), V.rows(0, p));
      EXPECT_LT(arma::abs(ex.Y.row(r) - x.Y).max(), 1e-12 * (1 + arma::abs(x.Y).max())) << "row " << r;
      EXPECT_NEAR(ex.log_normaliser(r), x.log_normaliser(0), 1e-12 * (1 + std::abs(x.log_normaliser(0))));
    }
  }
  // Position 0 sees one key: its value row, exactly.
  EXPECT_LT(arma::abs(ex.Y.row(1) - V.row(0)).max(), 1e-14);
  const auto e = fit_attention_estimator("pos", Q, K);
  Rng rng(65);
  const Draw w = e->draw(8, rng, Sampler::Iid);
  EXPECT_THROW(exact_causal_attention(Q, {1, 2}, K, V), InvalidArgument);                               // one per query
  EXPECT_THROW(approximate_causal_attention(*e, w, Q, {0, 1, 2, 3, 4, 5, 40}, K, V), InvalidArgument);  // beyond
}

TEST(Attention, IdenticalForOneAndTwoThreads) {
  const arma::mat Q = points(8, 700, 1.0, 51), K = points(8, 600, 1.0, 52), V = values(600, 3, 53);
  const auto e = fit_attention_estimator("oprf", Q, K);
  auto run = [&](int threads) {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
    Rng rng(8, Stream::Features, 0);
    const Draw w = e->draw(16, rng, Sampler::Iid);
    return std::make_pair(exact_attention(Q, K, V, 128), approximate_attention(*e, w, Q, K, V));
  };
  const auto one = run(1), two = run(2);
  EXPECT_TRUE(arma::all(arma::vectorise(one.first.Y == two.first.Y)));
  EXPECT_TRUE(arma::all(one.first.log_normaliser == two.first.log_normaliser));
  EXPECT_TRUE(arma::all(arma::vectorise(one.second.Y == two.second.Y)));
}

}  // namespace
}  // namespace kestrel
