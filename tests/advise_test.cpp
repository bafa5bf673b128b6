// `kestrel advise` (tasks/advise.hpp): the M it names reaches the target in simulation (the quick reproduction, over
// every input, estimator and quantity), the M arithmetic, the coupled rows, the number-format verdicts, determinism
// across thread counts and bad input.
// False-failure rate: the reproduction's checks are one-sided at 4.5 SE of the measured row (P(Z > 4.5) = 3.4e-6
// each where the prediction sits exactly at the target; it is at or below it), about 60 checks: < 2.1e-4 in all.
// Seeds are fixed, so a failure reproduces.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include <oneapi/tbb/global_control.h>

#include "core/error.hpp"
#include "experiment.hpp"
#include "io/hdf5.hpp"
#include "io/hdf5_reader.hpp"
#include "tasks/advise.hpp"
#include "test_util.hpp"

namespace kestrel {
namespace {

struct Small {
  arma::mat Q = test::points(8, 40, 0.4, 61), K = test::points(8, 50, 0.4, 62);
  arma::mat V = test::points(3, 50, 1.0, 63).t() + 1.0;
};

AdviseOptions quick(std::vector<std::string> estimators = {"pos", "oprf", "sderf"}) {
  AdviseOptions o;
  o.estimators = std::move(estimators);
  o.timing = false;
  o.budget = 4096;
  return o;
}

const AdviceRow& find(const Advice& a, const std::string& e, const std::string& sampler = "iid") {
  for (const auto& r : a.rows)
    if (r.estimator == e && r.sampler == sampler) return r;
  throw std::runtime_error("no row " + e + " " + sampler);
}

TEST(Advise, NamedMReachesTheTargetInSimulation) {
  // The quick reproduction: 5 inputs x positive estimators x (output rows, normalisers), each validated by simulation.
  const auto& e = experiments::find_experiment("advise");
  experiments::Options opt;
  opt.quick = true;
  const std::string file =
      (std::filesystem::temp_directory_path() / ("kestrel_advise_" + std::to_string(::getpid()) + ".h5")).string();
  {
    H5Writer h5(file);
    std::vector<experiments::Claim> claims;
    e.run(opt, h5, claims);
    h5.commit();
  }
  const H5Reader r(file);
  const arma::vec pred = r.read_vec("/predicted_p95"), meas = r.read_vec("/measured_p95"),
                  se = r.read_vec("/measured_p95_se");
  std::filesystem::remove(file);
  EXPECT_GE(meas.n_elem, 20u);  // the issue asks for at least 20 (input, estimator) combinations
  for (arma::uword i = 0; i < meas.n_elem; ++i) {
    EXPECT_LE(pred[i], 0.1 * (1 + 1e-12)) << i;
    EXPECT_LE(meas[i] - test::kSigmas * se[i], 0.1)
        << "combination " << i << ": measured " << meas[i] << " +- " << se[i];
  }
}

TEST(Advise, IidMIsTheSmallestReachingTheTarget) {
  const Small s;
  const Advice a = advise(s.Q, s.K, s.V, quick());
  for (const auto& r : a.rows) {
    if (r.status != "ok") continue;
    ASSERT_GT(r.m_p95, 0u) << r.estimator;
    // e(M) = e(1) / sqrt(M): at m_p95 within the target, at m_p95 - 1 above it.
    EXPECT_LE(r.err1_p95 / std::sqrt(double(r.m_p95)), a.options.target * (1 + 1e-12)) << r.estimator;
    if (r.m_p95 > 1) EXPECT_GT(r.err1_p95 / std::sqrt(double(r.m_p95 - 1)), a.options.target) << r.estimator;
    EXPECT_LE(r.m_median, r.m_p95);
    EXPECT_NEAR(r.at_m_p95, r.err1_p95 / std::sqrt(double(r.m_p95)), 1e-15);
  }
  ASSERT_TRUE(a.best.has_value());
  for (const auto& r : a.rows)
    if (r.status == "ok") EXPECT_LE(a.rows[*a.best].m_p95, r.m_p95);
  EXPECT_NE(a.recommendation.find(a.rows[*a.best].estimator), std::string::npos);
  // The coupled samplers are not predicted for attention rows, and say why.
  EXPECT_EQ(find(a, "pos", "orthogonal").status, "not applicable");
  EXPECT_NE(find(a, "pos", "orthogonal").reason.find("iid"), std::string::npos);
}

TEST(Advise, KernelEntriesWithOrthogonalFeaturesNeedNoMoreThanIid) {
  // Positive features: orthogonal projections never increase the variance (CRT Thm 4.1, exact in kestrel's
  // coupled_variance), so the M for the target is at most the iid one; TrigRF is not positive and may differ.
  const Small s;
  AdviseOptions o = quick({"pos", "oprf", "trig"});
  o.quantity = AdviseQuantity::Kernel;
  o.target = 0.05;
  const Advice a = advise(s.Q, s.K, arma::mat(), o);
  for (const std::string e : {"pos", "oprf"}) {
    const auto &iid = find(a, e), &ort = find(a, e, "orthogonal");
    ASSERT_EQ(ort.status, "ok") << ort.reason;
    EXPECT_EQ(ort.method, "exact (coupled)");
    EXPECT_LE(ort.m_p95, iid.m_p95) << e;
    EXPECT_LE(ort.at_m_p95, o.target);
  }
  EXPECT_EQ(find(a, "trig").status, "ok");  // every family estimates kernel entries
}

TEST(Advise, Fp16VerdictsSeeOverflowAndTheStabiliserFixesIt) {
  // Logits up to ~30: the row normalisers exceed 65504 in fp16 without the stabiliser; with it every feature is <= 1
  // and a normaliser at most M Lk.
  const arma::mat Q = test::points(8, 30, 2.5, 71), K = test::points(8, 30, 2.5, 72);
  AdviseOptions o = quick({"pos"});
  o.scale_sqrt_d = false;
  o.budget = 64;
  const Advice a = advise(Q, K, arma::mat(), o);
  const auto& r = find(a, "pos");
  ASSERT_TRUE(r.range.has_value());
  const auto& f = number_formats();
  for (std::size_t k = 0; k < f.size(); ++k) {
    if (f[k].name != "fp16") continue;
    EXPECT_EQ(r.range->verdict[k].first.rfind("overflow", 0), 0u) << r.range->verdict[k].first;
    EXPECT_EQ(r.range->verdict[k].second, "ok");
  }
  // PosRF's features are exp(w^T x - |x|^2/2): moderate; it is the normalisers sum_j e^{q.k_j} that overflow fp16.
  EXPECT_LT(r.range->query_max, std::log(65504.0));
}

TEST(Advise, SameReportForOneAndTwoThreads) {
  const Small s;
  AdviseOptions o = quick({"oprf"});
  o.validate = 20;
  std::vector<std::string> out;
  for (int threads : {1, 2}) {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
    out.push_back(to_json(advise(s.Q, s.K, s.V, o)).dump());
  }
  EXPECT_EQ(out[0], out[1]);
}

TEST(Advise, BadInputIsRefused) {
  const Small s;
  const AdviseOptions o = quick();
  EXPECT_THROW(advise(s.Q, test::points(7, 50, 0.4, 1), s.V, o), InvalidArgument);  // d differs
  arma::mat bad = s.Q;
  bad(2, 3) = arma::datum::nan;
  EXPECT_THROW(advise(bad, s.K, s.V, o), InvalidArgument);
  EXPECT_THROW(advise(arma::mat(8, 0), s.K, s.V, o), InvalidArgument);                     // empty
  EXPECT_THROW(advise(s.Q, s.K, arma::mat(49, 3, arma::fill::ones), o), InvalidArgument);  // V rows != keys
  AdviseOptions t = o;
  t.target = 0;
  EXPECT_THROW(advise(s.Q, s.K, s.V, t), InvalidArgument);
  t = o;
  t.budget = 0;
  EXPECT_THROW(advise(s.Q, s.K, s.V, t), InvalidArgument);
  t = o;
  t.kernel = Kernel::gaussian();  // attention is softmax attention
  EXPECT_THROW(advise(s.Q, s.K, s.V, t), InvalidArgument);
}

}  // namespace
}  // namespace kestrel
