// Attention-row error (analysis/attention_variance.hpp): the delta-method prediction against simulation where the
// normaliser is tight, the flags where it is not, Cantelli's bound on a non-positive normaliser, determinism.
// False-failure rate: at most 2 families x 6 rows + 6 rows (Cantelli) = 18 checks at the 4.5-SE rule
// (P(|Z| > 4.5) = 6.8e-6 each): 1.2e-4 in all (union bound). Seeds are fixed, so a failure reproduces.
#include <gtest/gtest.h>

#include <oneapi/tbb/global_control.h>

#include "analysis/attention_variance.hpp"
#include "estimators/registry.hpp"
#include "test_util.hpp"

namespace kestrel {
namespace {

struct Setting {
  arma::mat X = test::points(4, 6, 0.5, 61), Y = test::points(4, 8, 0.5, 62);
  arma::mat V = [] {
    arma::mat v = test::points(2, 8, 1.0, 63).t();
    v.col(0) += 1.0;
    return v;
  }();
};

TEST(AttentionError, DeltaMethodMatchesSimulationWhereTheNormaliserIsTight) {
  // Rows with r <= kDeltaMethodMaxRelVar: within 4.5 SE plus an allowance of 3 r for the O(r) relative remainder.
  const Setting s;
  for (const std::string name : {"oprf", "sderf"}) {
    const auto e = make_estimator(name, s.X, s.Y);
    const arma::uword M = 128;
    const auto p = predict_attention_error(*three_point_form(*e), true, Kernel::softmax(), s.X, s.Y, s.V, M);
    const auto m = simulate_attention(*e, Kernel::softmax(), s.X, s.Y, s.V, {20000, M, 5, Sampler::Iid});
    int checked = 0;
    for (arma::uword i = 0; i < s.X.n_cols; ++i) {
      if (p.outside(i)) continue;
      const double pred = std::exp(p.log_mse(i)), r = std::exp(p.log_rel_var(i));
      EXPECT_LE(std::abs(m.mse(i) - pred), test::kSigmas * m.se_mse(i) + 3 * r * pred)
          << name << " row " << i << ": measured " << m.mse(i) << " +- " << m.se_mse(i) << ", predicted " << pred;
      ++checked;
    }
    EXPECT_GE(checked, 4) << name << ": too few rows inside the delta method's range to test it";
  }
}

TEST(AttentionError, FlagsRowsWhereTheExpansionFails) {
  // PosRF with one feature: r > 100 on row 0, and the prediction exceeds the bound that holds for every draw.
  const Setting s;
  const auto e = make_estimator("pos", s.X, s.Y);
  const auto p = predict_attention_error(*three_point_form(*e), true, Kernel::softmax(), s.X, s.Y, s.V, 1);
  EXPECT_GT(std::exp(p.log_rel_var(0)), 100);
  EXPECT_GT(p.log_mse(0), p.log_mse_bound(0));
  EXPECT_EQ(p.outside(0), 1u);
  const auto m = simulate_attention(*e, Kernel::softmax(), s.X, s.Y, s.V, {4000, 1, 5, Sampler::Iid});
  EXPECT_LT(m.mse(0), std::exp(p.log_mse_bound(0)));  // the bound holds for every draw, so for the mean
  EXPECT_LT(m.mse(0), 0.1 * std::exp(p.log_mse(0)));  // and the delta method is far off there
}

TEST(AttentionError, CantelliBoundsANonPositiveNormaliser) {
  const Setting s;
  const auto e = make_estimator("trig", s.X, s.Y);
  const auto p = predict_attention_error(*three_point_form(*e), false, Kernel::softmax(), s.X, s.Y, s.V, 4);
  const std::size_t R = 20000;
  const auto m = simulate_attention(*e, Kernel::softmax(), s.X, s.Y, s.V, {R, 4, 9, Sampler::Iid});
  EXPECT_GT(arma::accu(m.nonpositive), 0u);  // it happens
  for (arma::uword i = 0; i < s.X.n_cols; ++i) {
    const double b = p.p_nonpositive_bound(i), frac = static_cast<double>(m.nonpositive(i)) / R;
    EXPECT_GT(b, 0);
    EXPECT_LE(frac, b + test::kSigmas * std::sqrt(b * (1 - b) / R)) << "row " << i;
  }
  const auto positive = predict_attention_error(*three_point_form(*make_estimator("oprf", s.X, s.Y)), true,
                                                Kernel::softmax(), s.X, s.Y, s.V, 4);
  EXPECT_TRUE(arma::all(positive.p_nonpositive_bound == 0));
}

TEST(AttentionError, SimulationIdenticalForOneAndTwoThreads) {
  const Setting s;
  const auto e = make_estimator("sderf", s.X, s.Y);
  auto run = [&](int threads) {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
    return simulate_attention(*e, Kernel::softmax(), s.X, s.Y, s.V, {50, 3, 2, Sampler::Orthogonal}).mse;
  };
  EXPECT_TRUE(arma::all(run(1) == run(2)));
}

}  // namespace
}  // namespace kestrel
