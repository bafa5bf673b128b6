// Sampled query rows (analysis/row_sample.hpp) of the exact K-hat C moments and attention-row errors: each sampled row
// equals the same row of the full computation (a deterministic identity up to rounding: the two differ only in the
// shapes of the BLAS products), with keys in several tiles and row blocks, real, complex and Hermitian forms, tiny
// and e^80+ magnitudes; the sample itself is seeded, sorted and distinct; bad rows are refused naming the value.
#include <gtest/gtest.h>

#include <oneapi/tbb/global_control.h>

#include "analysis/attention_variance.hpp"
#include "analysis/operator_variance.hpp"
#include "analysis/row_sample.hpp"
#include "core/error.hpp"
#include "core/logmath.hpp"
#include "estimators/gerf/gerf.hpp"
#include "estimators/registry.hpp"
#include "sanitized.hpp"
#include "test_util.hpp"

namespace kestrel {
namespace {

// Equal values given as logs: |e^a - e^b| <= tol (e^b + e^scale), identical where -inf. scale is the log of the
// magnitude the computation's sums carry ((K C)_ia (K C)_ib / M for a covariance): where a variance is many orders
// below it (TrigRF and GERF at inputs of 1e-3: Var ~ 1e-10 (KC)^2 / M, from terms that cancel), rounding at 1e-16 of
// the terms is 1e-9 of the variance in the full computation as much as in the sampled one; elsewhere the bound is
// tol relative to the value itself.
void expect_same(const arma::mat& a, const arma::mat& b, const arma::mat& scale, double tol, const std::string& what) {
  ASSERT_EQ(a.n_rows, b.n_rows) << what;
  ASSERT_EQ(a.n_cols, b.n_cols) << what;
  for (arma::uword i = 0; i < a.n_elem; ++i) {
    ASSERT_FALSE(std::isnan(a(i)) || a(i) == kInf) << what << " entry " << i;
    if (a(i) == -kInf || b(i) == -kInf) {
      EXPECT_EQ(a(i), b(i)) << what << " entry " << i;
      continue;
    }
    const double hi = std::max(a(i), b(i)), lo = std::min(a(i), b(i));
    const double log_diff = hi + std::log(-std::expm1(lo - hi));
    EXPECT_LE(log_diff, std::log(tol) + log_add_exp(b(i), scale(i)))
        << what << " entry " << i << ": " << a(i) << " against " << b(i);
  }
}
void expect_same(const arma::mat& a, const arma::mat& b, double tol, const std::string& what) {
  expect_same(a, b, arma::mat(a.n_rows, a.n_cols, arma::fill::value(-kInf)), tol, what);
}

// L = 600 queries (two row blocks of 512) and 600 keys (three key tiles of 256); 37 sampled rows spread over both
// blocks. tol 1e-12 relative (expect_same says relative to what where a variance is far below the terms it sums).
// Release runs every estimator at every scale; the sanitizers (a deterministic identity: nothing to gain from
// repeating it) run each estimator at two of the scales, in turn, so that every scale and estimator is still run.
TEST(RowSample, SampledRowsEqualTheFullComputationsRows) {
  const arma::uword d = 5, L = 600;
  const arma::uvec rows = sample_rows(L, 37, 3);
  ASSERT_GT(rows.max(), 512u);
  ASSERT_LT(rows.min(), 512u);
  const std::vector<std::string> names = {"pos", "oprf", "sderf", "trig", "gerf"};
  const std::vector<double> scales = {1e-3, 0.5, 1.2, 4.0};
  for (std::size_t k = 0; k < names.size(); ++k)
    for (std::size_t s = 0; s < scales.size(); ++s) {
      if (test::kSanitized && s != k % scales.size() && s != (k + 2) % scales.size()) continue;
      const std::string& name = names[k];
      const double scale = scales[s];
      const arma::mat X = test::points(d, L, scale, 61), Y = test::points(d, L, scale, 62);
      const arma::mat V = test::points(3, L, 1.0, 63).t();
      const auto e = make_estimator(name, X, Y);
      const ThreePointForm form = *three_point_form(*e);
      const std::string what = fmt::format("{} scale {}", name, scale);
      const arma::mat C = arma::join_rows(V, arma::ones(L));
      const KcMoments full = kc_moments(form, Kernel::softmax(), X, Y, C, 2);
      const KcMoments some = kc_moments(form, Kernel::softmax(), X, Y, C, 2, rows);
      const arma::mat kc = full.log_abs_kc.rows(rows);
      expect_same(some.log_var(), arma::mat(full.log_var().rows(rows)), 2 * kc - std::log(2.0), 1e-12, what + " var");
      expect_same(some.log_abs_kc, kc, 1e-12, what + " |KC|");
      for (arma::uword r = 0; r < rows.n_elem; ++r) {
        arma::mat kc_ab = arma::repmat(kc.row(r).t(), 1, C.n_cols);
        kc_ab.each_row() += kc.row(r);
        expect_same(some.cov.log_abs.slice(r), full.cov.log_abs.slice(rows[r]), kc_ab - std::log(2.0), 1e-12,
                    what + " |cov|");
      }
      const AttentionPrediction pf = predict_attention_error(form, e->info().positive, Kernel::softmax(), X, Y, V, 2);
      const AttentionPrediction ps =
          predict_attention_error(form, e->info().positive, Kernel::softmax(), X, Y, V, 2, rows);
      // The MSE's terms carry |Y_i|^2 (and more) relative to D^2, the normaliser's relative variance 1.
      const arma::vec y2 = arma::log1p(arma::exp(2 * pf.log_norm_y(rows)));
      expect_same(ps.log_mse, arma::vec(pf.log_mse(rows)), y2, 1e-12, what + " mse");
      expect_same(ps.log_rel_var, arma::vec(pf.log_rel_var(rows)), arma::vec(rows.n_elem, arma::fill::zeros), 1e-12,
                  what + " rel var");
      EXPECT_LT(arma::abs(ps.Y - pf.Y.rows(rows)).max(), 1e-12 * (1 + arma::abs(pf.Y).max())) << what;
      EXPECT_TRUE(arma::all(ps.outside == pf.outside(rows))) << what;
      if (scale == 4.0) EXPECT_GT(some.log_var().max(), 80) << what;  // magnitudes past e^80, in log domain
    }
}

TEST(RowSample, ComplexGerfSampledRowsEqualFullRows) {
  const arma::mat X = test::points(3, 300, 0.3, 71), Y = test::points(3, 300, 0.3, 72);
  const GerfEstimator e("gerf", 3, {std::complex<double>(0.015, 0.04), 1});
  const arma::mat C = test::points(2, 300, 1.0, 73).t();
  const arma::uvec rows = {299, 0, 150};  // an explicit list, in the caller's order
  const KcMoments full = kc_moments(*three_point_form(e), Kernel::softmax(), X, Y, C, 1);
  const KcMoments some = kc_moments(*three_point_form(e), Kernel::softmax(), X, Y, C, 1, rows);
  expect_same(some.log_var(), arma::mat(full.log_var().rows(rows)), 1e-12, "complex gerf");
}

TEST(RowSample, SampledRowsIdenticalForOneAndTwoThreads) {
  // Key tiles run kTileWave at a time in parallel and are folded in tile order: bit for bit the same sums.
  const arma::mat X = test::points(4, 900, 0.4, 81), Y = test::points(4, 1100, 0.4, 82);
  const auto e = make_estimator("oprf", X, Y);
  const arma::mat V = test::points(2, 1100, 1.0, 83).t();
  const arma::uvec rows = sample_rows(900, 64, 5);
  auto run = [&](int threads) {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
    return std::pair(kc_moments(*three_point_form(*e), Kernel::softmax(), X, Y, V, 3, rows),
                     ratio_moments(*three_point_form(*e), Kernel::softmax(), X, Y, V, 3, rows));
  };
  const auto one = run(1), two = run(2);
  EXPECT_TRUE(arma::all(arma::vectorise(one.first.cov.log_abs == two.first.cov.log_abs)));
  EXPECT_TRUE(arma::all(one.second.log_trace == two.second.log_trace));
  EXPECT_TRUE(arma::all(arma::vectorise(one.second.log_abs_cov == two.second.log_abs_cov)));
}

TEST(RowSample, SeededSortedDistinct) {
  const arma::uvec a = sample_rows(131072, 512, 1), b = sample_rows(131072, 512, 1), c = sample_rows(131072, 512, 2);
  EXPECT_TRUE(arma::all(a == b));
  EXPECT_FALSE(arma::all(a == c));
  EXPECT_EQ(arma::uvec(arma::unique(a)).n_elem, 512u);  // distinct
  EXPECT_TRUE(a.is_sorted());
  EXPECT_LT(a.max(), 131072u);
  EXPECT_TRUE(arma::all(sample_rows(7, 7, 9) == arma::regspace<arma::uvec>(0, 6)));  // n = L: every row
}

TEST(RowSample, RefusesBadRowsNamingThem) {
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { sample_rows(10, 0, 1); }).find("got 0"), std::string::npos);
  EXPECT_NE(message([] { sample_rows(10, 11, 1); }).find("got 11"), std::string::npos);
  EXPECT_NE(message([] { check_rows({1, 10}, 10); }).find("10"), std::string::npos);
  EXPECT_NE(message([] { check_rows({3, 1, 3}, 10); }).find("3 is repeated"), std::string::npos);
  EXPECT_NE(message([] { check_rows({}, 10); }).find("empty"), std::string::npos);
  const arma::mat X = test::points(3, 4, 0.5, 51), Y = test::points(3, 5, 0.5, 52);
  const ThreePointForm f = *three_point_form(*make_estimator("pos", X, Y));
  EXPECT_THROW(kc_moments(f, Kernel::softmax(), X, Y, arma::ones(5, 1), 1, arma::uvec{4}), InvalidArgument);
  EXPECT_THROW(ratio_moments(f, Kernel::softmax(), X, Y, arma::ones(5, 1), 1, arma::uvec{0, 0}), InvalidArgument);
}

}  // namespace
}  // namespace kestrel
