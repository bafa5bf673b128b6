// The estimator contract (issue #21): one parameterised suite that every registered family runs,
// with nothing listed by hand. Bad inputs are refused, log-variances are finite on a small grid, the
// estimate is unbiased and its exact variance matches the Monte Carlo simulator (4.5-SE rule), feature
// variants agree, results do not depend on the thread count, and an estimator restored from its state() is the
// same estimator. Learned maps (kind Learned: deterministic,
// no variance) run the parts that apply to a feature map and skip the variance parts, saying so.
//
// False-failure rate: the Monte Carlo test makes 3 (M = 1, 2, 3: odd and even, for families that pair their
// draws) x 16 entries x 2 (mean, variance) = 96 checks per family at P(|Z| > 4.5) = 6.8e-6 each: 6.5e-4 per
// family, about 1.2e-2 for the 19 families with a variance (union bound); the seeds are fixed, so a run is
// deterministic and a failure reproduces.
#include <gtest/gtest.h>

#include <limits>

#include <oneapi/tbb/global_control.h>

#include "analysis/montecarlo.hpp"
#include "analysis/operator_variance.hpp"
#include "core/error.hpp"
#include "estimators/registry.hpp"
#include "test_util.hpp"

namespace kestrel {
namespace {

class Contract : public ::testing::TestWithParam<std::string> {
 protected:
  // Small sets at a moderate scale: every family is defined here (DARK needs the second moment's
  // eigenvalues below 1/2) and its estimate has light enough tails for 20000 repetitions.
  static constexpr arma::uword kDim = 3, kPoints = 4;
  arma::mat X = test::points(kDim, kPoints, 0.3, 11), Y = test::points(kDim, kPoints, 0.3, 12);
  std::unique_ptr<Estimator> fitted() const { return make_estimator(GetParam(), X, Y); }
  std::unique_ptr<FeatureMap> map() const { return make_feature_map(GetParam(), X, Y); }
  bool learned() const { return find_family(GetParam()).kind == Kind::Learned; }
  // Learned maps have a fixed number of features; random ones take any M.
  static arma::uword features_of(const FeatureMap& e, arma::uword M) {
    return e.fixed_features() > 0 ? e.fixed_features() : M;
  }
};

std::vector<std::string> family_names() {
  std::vector<std::string> names;
  for (const auto& f : estimator_families()) names.push_back(f.name);
  return names;
}

std::string test_name(const ::testing::TestParamInfo<std::string>& p) {
  std::string s;
  for (char c : p.param) s += std::isalnum(static_cast<unsigned char>(c)) ? c : (c == '+' ? 'P' : '_');
  return s;
}

TEST_P(Contract, RefusesBadInput) {
  const arma::mat empty(kDim, 0), wrong_dim = test::points(kDim + 1, kPoints, 0.3, 13);
  arma::mat nan = X, inf = X;
  nan(1, 2) = std::numeric_limits<double>::quiet_NaN();
  inf(0, 1) = std::numeric_limits<double>::infinity();
  EXPECT_THROW(make_feature_map(GetParam(), empty, Y), InvalidArgument);
  EXPECT_THROW(make_feature_map(GetParam(), X, wrong_dim), InvalidArgument);
  EXPECT_THROW(make_feature_map(GetParam(), nan, Y), InvalidArgument);
  EXPECT_THROW(make_feature_map(GetParam(), X, inf), InvalidArgument);
  const auto e = map();
  EXPECT_EQ(e->dim(), kDim);
  EXPECT_EQ(e->info().name, GetParam());
  if (learned()) {
    EXPECT_THROW(make_estimator(GetParam(), X, Y), InvalidArgument);  // no variance: refused, saying why
  } else {
    const auto v = fitted();
    EXPECT_THROW(v->log_var_over_k2(wrong_dim, wrong_dim), InvalidArgument);
    EXPECT_THROW(v->log_var_over_k2(nan, Y), InvalidArgument);
    EXPECT_THROW(v->log_var_over_k2(X, empty), InvalidArgument);
  }
  Rng rng(1, Stream::User, 0);
  EXPECT_THROW(e->draw(0, rng, Sampler::Iid), InvalidArgument);
  const Draw w = e->draw(features_of(*e, 4), rng, Sampler::Iid);
  EXPECT_THROW(feature_map(*e, w, wrong_dim, Side::Query, Kernel::softmax()), InvalidArgument);
  EXPECT_THROW(feature_map(*e, w, inf, Side::Key, Kernel::softmax()), InvalidArgument);
}

TEST_P(Contract, FiniteLogVariancesOnASmallGrid) {
  if (learned()) GTEST_SKIP() << GetParam() << " is a learned deterministic map: no variance";
  int defined = 0;
  for (double sigma : {0.05, 0.3, 0.6})
    for (arma::uword d : {2u, 5u}) {
      const arma::mat A = test::points(d, 6, sigma, 21), B = test::points(d, 6, sigma, 22);
      std::unique_ptr<Estimator> e;
      try {
        e = make_estimator(GetParam(), A, B);
      } catch (const Undefined&) {
        continue;  // not defined here by theory (DARK at large sigma): a result, not a contract breach
      }
      ++defined;
      for (const Kernel& k : {Kernel::softmax(), Kernel::gaussian()}) {
        const arma::mat lv = log_variance(*e, k, A, B, 3);
        for (double v : lv)
          EXPECT_TRUE(!std::isnan(v) && v < std::numeric_limits<double>::infinity())
              << GetParam() << " sigma " << sigma << " d " << d << " " << k.name() << ": " << v;
      }
    }
  EXPECT_GE(defined, 3) << GetParam() << " is undefined on most of the grid";
}

TEST_P(Contract, UnbiasedWithTheExactVariance) {
  if (learned()) GTEST_SKIP() << GetParam() << " is a learned deterministic map: no variance, and biased";
  const auto e = fitted();
  for (arma::uword M : {1u, 2u, 3u}) {
    const MonteCarloResult r = simulate(*e, Kernel::softmax(), X, Y, {20000, M, 7 + M, Sampler::Iid});
    // The 4.5-SE rule plus a rounding floor (64 ulp of K), for families exact at some pairs (variance 0).
    const arma::mat exact_var = arma::exp(log_variance(*e, Kernel::softmax(), X, Y, M));
    const auto& m = r.kernel;
    for (arma::uword i = 0; i < m.exact.n_elem; ++i) {
      const double ulp = 64 * std::numeric_limits<double>::epsilon() * m.exact(i);
      EXPECT_LE(std::abs(m.mean(i) - m.exact(i)), test::kSigmas * m.se_mean(i) + ulp)
          << GetParam() << " M " << M << " entry " << i << ": mean " << m.mean(i) << " vs K " << m.exact(i);
      EXPECT_LE(std::abs(m.variance(i) - exact_var(i)), test::kSigmas * m.se_variance(i) + ulp * ulp)
          << GetParam() << " M " << M << " entry " << i << ": MC var " << m.variance(i) << " vs exact " << exact_var(i);
    }
  }
}

TEST_P(Contract, FeatureVariantsAgree) {
  const auto e = map();
  Rng rng(3, Stream::User, 0);
  const Draw w = e->draw(features_of(*e, 5), rng, Sampler::Iid);
  const arma::vec scale = arma::linspace(-2.0, 3.0, kPoints);
  for (Side side : {Side::Query, Side::Key}) {
    const arma::mat F = e->features(w, X, side);
    ASSERT_EQ(F.n_rows, kPoints);
    EXPECT_EQ(F.n_cols, e->features(w, Y, side == Side::Query ? Side::Key : Side::Query).n_cols) << GetParam();
    EXPECT_TRUE(F.is_finite());
    const arma::mat S0 = e->features(w, X, side, arma::zeros(kPoints));
    EXPECT_LT(arma::abs(S0 - F).max(), 1e-12 * (1 + arma::abs(F).max())) << GetParam();
    // The 1/sqrt(M) of the average is applied once, by the base: raw_features is f itself (a deterministic map, whose
    // draw has no random objects, has no average).
    const double root_m = w.count() > 0 ? std::sqrt(static_cast<double>(w.count())) : 1.0;
    const arma::mat R = e->raw_features(w, X, side);
    EXPECT_LT(arma::abs(R - root_m * F).max(), 1e-12 * (1 + arma::abs(R).max())) << GetParam();
    const arma::mat S = e->features(w, X, side, scale);
    const arma::mat expected = F.each_col() % arma::exp(scale);
    EXPECT_LT(arma::abs(S - expected).max(), 1e-12 * (1 + arma::abs(expected).max())) << GetParam();
    if (e->info().positive) {
      // Positive: > 0, or 0 by structure (clustered HRF's other-cluster blocks), where the log is -inf.
      EXPECT_TRUE(arma::all(arma::vectorise(F) >= 0)) << GetParam();
      const arma::mat L = e->log_features(w, X, side);
      EXPECT_LT(arma::abs(arma::exp(L) - F).max(), 1e-12 * arma::abs(F).max()) << GetParam();
    } else {
      EXPECT_THROW(e->log_features(w, X, side), InvalidArgument);
    }
  }
  // The kernel estimate of one draw is the product of the two feature maps.
  const arma::mat K = approximate_kernel(*e, w, X, Y, Kernel::softmax());
  const arma::mat P = feature_map(*e, w, X, Side::Query, Kernel::softmax());
  const arma::mat S = feature_map(*e, w, Y, Side::Key, Kernel::softmax());
  EXPECT_LT(arma::abs(K - P * S.t()).max(), 1e-12 * (1 + arma::abs(K).max())) << GetParam();
}

// columns_per_draw() is what features() gives per drawn object (advise counts M in these columns), or 0 where the
// columns are not linear in the draws.
TEST_P(Contract, ColumnsPerDrawMatchTheFeatures) {
  if (learned()) GTEST_SKIP() << "a learned map has a fixed number of features";
  const auto e = map();
  const arma::uword c = e->columns_per_draw();
  std::vector<arma::uword> cols;
  for (arma::uword m : {1, 2, 5}) {
    Rng rng(3, Stream::User, m);
    cols.push_back(e->features(e->draw(m, rng, Sampler::Iid), X, Side::Query).n_cols);
  }
  if (c > 0) {
    EXPECT_EQ(cols, (std::vector<arma::uword>{c, 2 * c, 5 * c})) << GetParam();
  } else {
    EXPECT_NE(cols[2] - cols[1], 3 * (cols[1] - cols[0])) << GetParam() << ": columns linear in the draws";
  }
}

// A map with an exponent form (estimator.hpp) has exactly the features of its form, on both sides; a positive map
// without one says so by nullopt.
TEST_P(Contract, ExponentFormGivesTheFeatures) {
  const auto e = map();
  Rng rng(4, Stream::User, 0);
  const Draw w = e->draw(features_of(*e, 6), rng, Sampler::Iid);
  for (Side side : {Side::Query, Side::Key}) {
    const auto form = e->exponent_form(w, side);
    if (!form) continue;
    ASSERT_TRUE(e->info().positive) << GetParam();
    const ExponentPoints points = e->exponent_points(X, side);
    arma::mat E = points.Z.t() * form->P;
    E.each_row() += form->col;
    E.each_col() += points.row;
    arma::mat L = e->raw_log_features(w, X, side);
    ASSERT_EQ(E.n_cols, L.n_cols) << GetParam();
    // With groups: a point's features outside its group's columns are 0 (log -inf), and only those.
    const arma::uvec& g = points.group;
    ASSERT_EQ(g.n_elem, form->group.is_empty() ? 0 : X.n_cols) << GetParam();
    for (arma::uword i = 0; i < g.n_elem; ++i)
      for (arma::uword m = 0; m < L.n_cols; ++m) {
        const bool outside = g(i) != form->group(m);
        EXPECT_EQ(outside, L(i, m) == -std::numeric_limits<double>::infinity()) << GetParam();
        if (outside) E(i, m) = L(i, m) = 0;
      }
    EXPECT_LT(arma::abs(E - L).max(), 1e-12 * (1 + arma::abs(L).max())) << GetParam();
  }
}

// The families that advise's long-context path relies on have their exponent form (the others take the slower path).
TEST(ExponentForm, TheGaussianProjectionFamiliesHaveOne) {
  const arma::mat X = test::points(3, 4, 0.3, 11), Y = test::points(3, 4, 0.3, 12);
  for (const std::string name : {"pos", "oprf", "aderf", "sderf", "saderf", "pos-anti", "pos-hyp", "dark", "dark-iso",
                                 "pois+", "geom+", "hrf-cluster"}) {
    const auto e = make_estimator(name, X, Y);
    Rng rng(5, Stream::User, 0);
    EXPECT_TRUE(e->exponent_form(e->draw(4, rng, Sampler::Iid), Side::Key).has_value()) << name;
  }
}

TEST_P(Contract, IdenticalForOneAndTwoThreads) {
  auto run = [&](int threads) {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
    if (learned()) {  // deterministic: the kernel estimate of its one draw
      const auto e = map();
      Rng rng(5, Stream::User, 0);
      const Draw w = e->draw(e->fixed_features(), rng, Sampler::Iid);
      return std::make_pair(approximate_kernel(*e, w, X, Y, Kernel::gaussian()), arma::mat());
    }
    const auto e = fitted();
    const MonteCarloResult r = simulate(*e, Kernel::gaussian(), X, Y, {64, 4, 5, Sampler::Iid});
    return std::make_pair(arma::mat(arma::join_rows(r.kernel.mean, r.kernel.variance)),
                          arma::mat(e->log_var_over_k2(X, Y)));
  };
  const auto one = run(1), two = run(2);
  EXPECT_TRUE(arma::all(arma::vectorise(one.first == two.first))) << GetParam();  // bitwise (-inf == -inf)
  EXPECT_TRUE(arma::all(arma::vectorise(one.second == two.second))) << GetParam();
}

TEST_P(Contract, RestoresFromItsStateExactly) {
  if (learned())
    GTEST_SKIP() << GetParam()
                 << " is a learned map: it has no estimator state (trained maps are saved by "
                    "the reproduction)";
  const auto e = fitted();
  const nlohmann::json state = nlohmann::json::parse(e->state().dump());  // as text, as a pickle keeps it
  const auto r = restore_estimator(state);
  EXPECT_EQ(r->info().name, GetParam());
  EXPECT_EQ(r->dim(), e->dim());
  EXPECT_EQ(r->state(), e->state()) << GetParam();
  EXPECT_EQ(r->params(), e->params()) << GetParam();
  Rng a(7, Stream::User, 0), b(7, Stream::User, 0);
  const Draw w = e->draw(5, a, Sampler::Orthogonal), v = r->draw(5, b, Sampler::Orthogonal);
  for (Side side : {Side::Query, Side::Key})
    EXPECT_TRUE(arma::all(arma::vectorise(e->features(w, X, side) == r->features(v, X, side)))) << GetParam();
  EXPECT_TRUE(arma::all(arma::vectorise(e->log_var_over_k2(X, Y) == r->log_var_over_k2(X, Y)))) << GetParam();
  // A damaged state is refused with the field it lacks.
  for (const auto& [key, value] : state.items()) {
    if (key == "family" || key == "summary") continue;
    nlohmann::json bad = state;
    bad.erase(key);
    EXPECT_THROW(restore_estimator(bad), InvalidArgument) << GetParam() << " without " << key;
  }
}

// The registry's flags say which forms the family's estimators give (the hooks in the family folder).
TEST_P(Contract, FormFlagsMatchTheEstimator) {
  if (learned()) GTEST_SKIP() << GetParam() << " is a learned map: no variance";
  const auto e = fitted();
  EXPECT_EQ(e->three_point_form().has_value(), find_family(GetParam()).has_three_point_form) << GetParam();
  EXPECT_EQ(e->isotropic_form().has_value(), find_family(GetParam()).has_isotropic_form) << GetParam();
}

// The exact variance of K-hat C (analysis/operator_variance.hpp) for every family with a three-point form: with a unit
// column C = e_j it is the pair variance (deterministic, 1e-9 relative); a signed, a positive and their sum column
// match the simulator (4.5-SE rule, M = 2: 4 rows x 3 columns = 12 checks at 6.8e-6, 8.2e-5 per family); and
// the covariance of two columns is consistent with the variance of their sum (deterministic).
TEST_P(Contract, KcVarianceIsExact) {
  if (learned()) GTEST_SKIP() << GetParam() << " is a learned map: no variance";
  const auto e = fitted();
  const auto form = three_point_form(*e);
  if (!form) GTEST_SKIP() << GetParam() << " has no three-point form: K-hat C's variance is estimated by Monte Carlo";
  const arma::mat pair = log_variance(*e, Kernel::softmax(), X, Y, 2);
  for (arma::uword j = 0; j < Y.n_cols; ++j) {
    arma::mat unit(Y.n_cols, 1, arma::fill::zeros);
    unit(j) = 1;
    const arma::mat lv = kc_moments(*form, Kernel::softmax(), X, Y, unit, 2).log_var();
    for (arma::uword i = 0; i < X.n_cols; ++i)
      EXPECT_NEAR(lv(i), pair(i, j), 1e-9 * std::max(1.0, std::abs(pair(i, j)))) << GetParam() << " pair " << i << j;
  }
  arma::mat C(Y.n_cols, 3);
  C.col(0) = {1.0, -0.7, 0.4, -1.3};
  C.col(1) = {0.5, 1.0, 2.0, 0.8};
  C.col(2) = C.col(0) + C.col(1);
  const KcMoments ex = kc_moments(*form, Kernel::softmax(), X, Y, C, 2);
  const MonteCarloResult r = simulate(*e, Kernel::softmax(), X, Y, {20000, 2, 31, Sampler::Iid}, &C);
  const auto& m = *r.kernel_times;
  const arma::mat var = arma::exp(ex.log_var());
  for (arma::uword i = 0; i < m.exact.n_elem; ++i)
    EXPECT_LE(std::abs(m.variance(i) - var(i)), test::kSigmas * m.se_variance(i))
        << GetParam() << " entry " << i << ": MC var " << m.variance(i) << " vs exact " << var(i);
  for (arma::uword i = 0; i < X.n_cols; ++i) {
    const double cov01 = ex.cov.sign(0, 1, i) * std::exp(ex.cov.log_abs(0, 1, i));
    EXPECT_EQ(ex.cov.sign(0, 1, i), ex.cov.sign(1, 0, i));
    EXPECT_NEAR(var(i, 2), var(i, 0) + var(i, 1) + 2 * cov01, 1e-9 * var(i, 2)) << GetParam() << " row " << i;
    EXPECT_NEAR(std::exp(ex.log_abs_kc(i, 2)) * ex.sign_kc(i, 2), m.exact(i, 2), 1e-12 * std::abs(m.exact(i, 2)));
  }
}

INSTANTIATE_TEST_SUITE_P(EveryFamily, Contract, ::testing::ValuesIn(family_names()), test_name);

}  // namespace
}  // namespace kestrel
