// advise's learned rows (tasks/advise/learned.hpp, issue 65): a Hedgehog map fitted on some sequences of a sharp head
// and judged on the others, ranked with the random rows. Deterministic (fixed seeds); the held-out errors themselves
// are checked against plain loops in learned_attention_test.cpp.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "core/error.hpp"
#include "core/hdf5_reader.hpp"
#include "core/rng.hpp"
#include "frontend/advise_options.hpp"
#include "io/hdf5.hpp"
#include "sharp_head.hpp"
#include "tasks/advise/advise.hpp"
#include "tasks/advise/heads.hpp"
#include "tasks/advise/learned.hpp"
#include "tasks/learned_attention.hpp"

namespace kestrel {
namespace {

using test::sharp_head;

AdviseOptions learned_options() {
  AdviseOptions o;
  o.estimators = {"pos"};
  o.samplers = {Sampler::Iid};
  o.timing = false;
  o.budget = 64;
  o.target = 0.6;
  o.learned = {"hedgehog"};
  o.learned_features = {8, 16, 32, 64};
  o.fit_seeds = 1;
  o.held_out = 2;
  return o;
}

TEST(AdviseLearned, ALearnedMapIsNamedWherePositiveFeaturesAreOutOfReach) {
  // PosRF at M <= 64 on this head has a p95 row error about 1.25 (learned_attention_test.cpp): out of reach of 60%;
  // the learned map, judged on 2 held-out sequences, reaches it at a fitted M, and is the recommendation.
  const HeadSequences h = sharp_head(6, 128);
  const AdviseOptions o = learned_options();
  const Advice a = advise_sequences(h, o);
  ASSERT_EQ(a.rows.size(), 2u);
  const AdviceRow &pos = a.rows[0], &learned = a.rows[1];
  EXPECT_EQ(pos.decision, "out of reach") << pos.at_m_p95;
  ASSERT_EQ(learned.decision, "M") << a.recommendation;
  EXPECT_TRUE(learned.m_p95 == 8 || learned.m_p95 == 16 || learned.m_p95 == 32 || learned.m_p95 == 64);
  EXPECT_LE(learned.at_m_p95, o.target);
  ASSERT_TRUE(a.best.has_value());
  EXPECT_EQ(a.rows[*a.best].estimator, "hedgehog");
  EXPECT_NE(a.recommendation.find("hedgehog with learned features"), std::string::npos) << a.recommendation;
  // The row's error at its M is the held-out p95 of the map whose parameters it holds (fit seed 0).
  LearnedCurveOptions lo;
  lo.features = o.learned_features, lo.held_out = o.held_out, lo.fit_seeds = 1, lo.seed = o.seed;
  const auto curve = learned_attention_curve(h, lo);
  const auto& fit =
      std::find_if(curve.begin(), curve.end(), [&](const auto& p) { return p.M == learned.m_p95; })->fits.front();
  ASSERT_EQ(learned.parameters_m, learned.m_p95);
  ASSERT_EQ(learned.parameters.size(), 2u);
  const arma::uword P = learned.m_p95 / 2;
  HedgehogParams p;
  p.W = arma::mat(learned.parameters[0].values.data(), 16, P).t();  // row-major P x d
  p.b = arma::vec(learned.parameters[1].values);
  EXPECT_EQ(learned.parameters[0].shape, (std::vector<arma::uword>{P, 16}));
  EXPECT_DOUBLE_EQ(learned_row_errors(p, h, fit.held_out_sequences).quantile, learned.at_m_p95);
}

TEST(AdviseLearned, TheReportHoldsTheParametersNamedWithTheirShapes) {
  const HeadSequences h = sharp_head(4, 64);
  AdviseOptions o = learned_options();
  o.learned_features = {8, 16};
  o.held_out = 1;
  const Advice a = advise_sequences(h, o);
  const AdviceRow& learned = a.rows.back();
  const std::string path =
      (std::filesystem::temp_directory_path() / ("kestrel_learned_" + std::to_string(::getpid()) + ".h5")).string();
  {
    H5Writer w(path);
    write_report(w, a, record_advise(o));
    w.commit();
  }
  H5Reader r(path);
  const arma::mat W = r.read_mat("/advise/hedgehog/learned/parameter_W");
  EXPECT_EQ(W.n_rows, learned.parameters_m / 2);
  EXPECT_EQ(W.n_cols, 16u);
  EXPECT_EQ(W(0, 1), learned.parameters[0].values[1]);  // row-major: W(0, 1) is the second value
  EXPECT_EQ(r.read_vec("/advise/hedgehog/learned/curve_m").n_elem, 2u);
  const nlohmann::json j = to_json(a, record_advise(o));
  EXPECT_EQ(j["rows"][1]["learned"]["parameters"][0]["name"], "W");
  EXPECT_EQ(j["rows"][1]["learned"]["parameters"][0]["values"].get<std::vector<double>>(),
            learned.parameters[0].values);
  std::filesystem::remove(path);
}

// With --causal the learned map is fitted and judged under the mask (learned_attention_test.cpp checks the masked
// objective's gradient and the masked held-out errors against plain loops): the row is the causal curve's, not the
// bidirectional one's.
TEST(AdviseLearned, CausalRowsAreFittedAndJudgedUnderTheMask) {
  HeadSequences h = sharp_head(4, 64);
  AdviseOptions o = learned_options();
  o.learned_features = {8, 16};
  o.held_out = 1;
  o.causal = true;
  const AdviceRow learned = advise_sequences(h, o).rows.back();
  ASSERT_EQ(learned.estimator, "hedgehog");
  LearnedCurveOptions lo;
  lo.features = o.learned_features, lo.held_out = o.held_out, lo.fit_seeds = 1, lo.seed = o.seed;
  const auto bidirectional = learned_attention_curve(h, lo);
  h.causal = true;
  const auto causal = learned_attention_curve(h, lo);
  ASSERT_EQ(learned.curve_p95.size(), 2u);
  for (std::size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(learned.curve_p95[k], causal[k].held_out_mean) << "M = " << causal[k].M;
    EXPECT_NE(learned.curve_p95[k], bidirectional[k].held_out_mean) << "M = " << causal[k].M;
  }
}

// Heads over sequences ([sequences, heads, L, d], grouped-query: 2 query heads read 1 key/value head): each query
// head's learned row is advise_sequences' on that head's sequences with the head's seed, the key/value head shared.
TEST(AdviseLearned, StackedHeadsAreEachFittedOnTheirOwnSequences) {
  const HeadSequences a = sharp_head(3, 32), b = sharp_head(3, 32, 9);
  const arma::uword S = 3, L = 32, d = 16, dv = 8;
  TokenArray Q{{S, 2, L, d}, arma::mat(d, S * 2 * L)}, K{{S, 1, L, d}, arma::mat(d, S * L)},
      V{{S, 1, L, dv}, arma::mat(dv, S * L)};
  for (arma::uword s = 0; s < S; ++s) {
    Q.data.cols(2 * s * L, (2 * s + 1) * L - 1) = a.Q[s];
    Q.data.cols((2 * s + 1) * L, (2 * s + 2) * L - 1) = b.Q[s];
    K.data.cols(s * L, (s + 1) * L - 1) = a.K[s];
    V.data.cols(s * L, (s + 1) * L - 1) = a.V[s].t();
  }
  const HeadStack stack = stack_sequences(Q, K, &V, {"Q", "K", "V"});
  ASSERT_EQ(stack.sequences, S);
  AdviseOptions o = learned_options();
  o.learned_features = {8, 16};
  o.held_out = 1;
  const HeadsAdvice heads = advise_heads(stack, o);
  ASSERT_EQ(heads.heads.size(), 2u);
  for (arma::uword h = 0; h < 2; ++h) {
    const HeadSequences own = head_sequences(stack, h);
    EXPECT_TRUE(arma::approx_equal(own.Q[2], h == 0 ? a.Q[2] : b.Q[2], "absdiff", 0.0));
    EXPECT_TRUE(arma::approx_equal(own.K[2], a.K[2], "absdiff", 0.0));  // the shared key/value head
    AdviseOptions mine = o;
    mine.seed = head_seed(o.seed, 0, h);
    const AdviceRow expected = advise_sequences(own, mine).rows.back();
    const AdviceRow& got = heads.heads[h].advice.rows.back();
    ASSERT_EQ(got.estimator, "hedgehog");
    EXPECT_EQ(got.curve_p95, expected.curve_p95) << "head " << h;
    EXPECT_EQ(got.decision, expected.decision) << "head " << h;
  }
  EXPECT_THROW(stack_sequences(Q, K, nullptr, {"Q", "K", "V"}), InvalidArgument);
}

// Scaling none (logits q.k, as kestrel.torch passes a model's q and k) fits the map to the same attention as sqrt-d
// on the points times d^(1/4): the two learned curves agree (to 1e-6 relative: the points differ by the rounding of
// x d^(1/4) / d^(1/4), which 100 L-BFGS iterations carry on; a map fitted to logits q.k / sqrt(d) instead differs
// by more than 5%, the negative control below).
TEST(AdviseLearned, ScalingNoneFitsTheLogitsItIsGiven) {
  const HeadSequences h = sharp_head(4, 48);
  AdviseOptions o = learned_options();
  o.learned_features = {8, 16};
  o.held_out = 1;
  const AdviceRow sqrt_d = advise_sequences(h, o).rows.back();
  HeadSequences small = h;
  for (auto* side : {&small.Q, &small.K})
    for (arma::mat& X : *side) X /= 2.0;  // d^(1/4) = 2 at d = 16
  o.scale_sqrt_d = false;
  const AdviceRow none = advise_sequences(small, o).rows.back();
  ASSERT_EQ(none.curve_p95.size(), 2u);
  for (std::size_t k = 0; k < 2; ++k)
    EXPECT_NEAR(none.curve_p95[k], sqrt_d.curve_p95[k], 1e-6 * sqrt_d.curve_p95[k]) << "M = " << none.curve_m[k];
  o.scale_sqrt_d = true;  // the negative control: the same points read with logits q.k / sqrt(d)
  const AdviceRow softer = advise_sequences(small, o).rows.back();
  EXPECT_GT(std::abs(softer.curve_p95[1] - sqrt_d.curve_p95[1]), 0.05 * sqrt_d.curve_p95[1]);
}

// The grid rule on made-up curves (M = 8, 16, 32, 64; SE 0.02 at each M; target 0.5): settled where the curve -+ 2 SE
// cross the target before the same fitted M, which is named; crossings before different fitted M are not settled; a
// curve - 2 SE above the target at M = 64 is out of reach.
LearnedCurvePoint made_up_point(arma::uword M, double p95, double se) {
  LearnedCurvePoint p;
  p.M = M, p.held_out_mean = p95, p.held_out_se = se, p.train_mean = 0.9 * p95;
  for (int s = 0; s < 2; ++s) {
    LearnedFitResult f;
    f.fit.params = hedgehog_init(4, M, 1);
    f.held_out.errors = {p95, p95};
    f.held_out.quantile = p95;
    p.fits.push_back(f);
  }
  return p;
}

AdviceRow made_up_row(const std::vector<double>& p95) {
  std::vector<LearnedCurvePoint> curve;
  for (std::size_t k = 0; k < p95.size(); ++k) curve.push_back(made_up_point(8u << k, p95[k], 0.02));
  AdviseOptions o = learned_options();
  o.target = 0.5;
  return learned_row(curve, o);
}

TEST(AdviseLearned, TheMIsNamedOnTheGrid) {
  const AdviceRow settled = made_up_row({0.9, 0.7, 0.45, 0.3});  // -+ 2 SE cross 0.5 between 16 and 32
  EXPECT_EQ(settled.decision, "M");
  EXPECT_EQ(settled.m_p95, 32u);
  EXPECT_EQ(settled.parameters_m, 32u);
  EXPECT_DOUBLE_EQ(settled.at_m_p95, 0.45);
  const AdviceRow open = made_up_row({0.9, 0.53, 0.47, 0.3});  // + 2 SE crosses after 32, - 2 SE before 16
  EXPECT_EQ(open.decision, "not settled");
  EXPECT_EQ(open.m_p95, 0u);
  EXPECT_EQ(made_up_row({0.9, 0.8, 0.7, 0.6}).decision, "out of reach");
}

TEST(AdviseLearned, LearnedMapsNeedSequences) {
  const HeadSequences h = sharp_head(3, 32);
  AdviseOptions o = learned_options();
  EXPECT_THROW(advise(h.Q[0], h.K[0], h.V[0], o), InvalidArgument);
  o.learned = {"luna"};
  EXPECT_THROW(advise_sequences(h, o), InvalidArgument);
  o.learned = {"hedgehog"};
  o.held_out = 3;
  EXPECT_THROW(advise_sequences(h, o), InvalidArgument);
}

}  // namespace
}  // namespace kestrel
