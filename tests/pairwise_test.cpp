// The streamed pairwise summary (analysis/pairwise.hpp) against the full Lx x Ly log-variance matrix, its vector and
// portable paths against each other, and PairGram's shared product (kernels/kernel.hpp) against the direct forms.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "analysis/pairwise.hpp"
#include "core/error.hpp"
#include "core/vecmath.hpp"
#include "estimators/registry.hpp"
#include "test_util.hpp"

using namespace kestrel;

namespace {

// Mean and sum of squared deviations of the entries above -inf, as the summary defines them (two passes, long double).
struct Moments {
  double n = 0, mean = 0, m2 = 0;
};
Moments moments_of(const arma::mat& v) {
  long double s = 0, n = 0;
  for (double x : v)
    if (x != -HUGE_VAL) s += x, n += 1;
  const long double mean = n > 0 ? s / n : 0;
  long double m2 = 0;
  for (double x : v)
    if (x != -HUGE_VAL) m2 += (x - mean) * (x - mean);
  return {static_cast<double>(n), static_cast<double>(mean), static_cast<double>(m2)};
}

// Sets with exact pairs for the positive families: y_0 = -x_0 (|x + y|^2 = 0, Var = 0) and y_1 = x_1 (TrigRF's).
std::pair<arma::mat, arma::mat> sets(arma::uword d, arma::uword Lx, arma::uword Ly) {
  arma::mat X = test::points(d, Lx, 0.4, 71), Y = test::points(d, Ly, 0.4, 72);
  Y.col(0) = -X.col(0);
  Y.col(1) = X.col(1);
  return {X, Y};
}

// PosRF's features with a given log-variance function of the sets: the test doubles below.
class WithLogVar final : public Estimator {
 public:
  using LogVar = std::function<arma::mat(const PairGram&)>;
  WithLogVar(std::unique_ptr<Estimator> base, LogVar f) : base_(std::move(base)), f_(std::move(f)) {
    info_ = base_->info();
    d_ = base_->dim();
  }
  nlohmann::json params() const override { return base_->params(); }
  nlohmann::json state() const override { return base_->state(); }

 protected:
  arma::mat log_var_hook(const PairGram& g) const override { return f_(g); }
  arma::mat features_hook(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale,
                          bool) const override {
    return base_->features(w, X, side, log_row_scale);
  }

 private:
  std::unique_ptr<Estimator> base_;
  LogVar f_;
};

// log |x + y|^2 from <cmath> (-inf at y = -x): the same on every SIMD path.
arma::mat log_of_squares(const PairGram& g) {
  arma::mat r = pairwise_sq_norm_sum(g, 1.0);
  for (double& v : r) v = std::log(v);
  return r;
}

}  // namespace

TEST(Pairwise, SummaryEqualsTheMomentsOfTheFullMatrix) {
  // Tiles of 16 over 37 x 29 pairs: partial tiles, tails shorter than the 8 lanes, and exact pairs (-inf) left out.
  const auto [X, Y] = sets(5, 37, 29);
  for (const Kernel k : {Kernel::softmax(), Kernel::gaussian()})
    for (const char* name : {"pos", "trig", "gerf", "oprf", "aderf", "pois", "pos-anti"})
      for (const arma::uword M : {1u, 4u}) {
        const auto e = make_estimator(name, X, Y);
        const PairwiseSummary s = summarize_exact_variance(*e, k, X, Y, 16, M);
        const arma::mat r = e->log_var_over_k2_m(X, Y, M), lk = log_kernel(k, X, Y);
        const Moments v = moments_of(r + 2 * lk), rel = moments_of(r + lk), kk = moments_of(lk);
        const std::string at = std::string(name) + " " + k.name() + " M = " + std::to_string(M);
        EXPECT_EQ(s.n_exact, static_cast<std::uint64_t>(X.n_cols * Y.n_cols - v.n)) << at;
        EXPECT_EQ(s.log_var.n, v.n) << at;
        // Sums of ~1000 terms in another order: relative rounding ~1e-13 of the terms' scale.
        const double scale = 1 + std::abs(v.mean) + std::sqrt(v.m2 / v.n);
        EXPECT_NEAR(s.log_var.mean, v.mean, 1e-12 * scale) << at;
        EXPECT_NEAR(s.log_var.m2, v.m2, 1e-11 * scale * scale * v.n) << at;
        EXPECT_NEAR(s.log_rel_var.mean, rel.mean, 1e-12 * scale) << at;
        EXPECT_NEAR(s.log_rel_var.m2, rel.m2, 1e-11 * scale * scale * v.n) << at;
        EXPECT_NEAR(s.log_kernel.mean, kk.mean, 1e-12 * (1 + std::abs(kk.mean))) << at;
        EXPECT_NEAR(s.log_kernel.m2, kk.m2, 1e-11 * (1 + kk.m2)) << at;
      }
  // The positive families are exact at y_0 = -x_0: pos leaves that pair out.
  const auto pos = make_estimator("pos", X, Y);
  EXPECT_GE(summarize_exact_variance(*pos, Kernel::softmax(), X, Y, 16).n_exact, 1u);
}

TEST(Pairwise, VectorAndPortablePathsGiveTheSameBits) {
  if (!simd::supported(simd::Isa::Avx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  // Log-variances from <cmath> only (LogOfSquares), so that the summary's own path is the one thing that changes.
  const auto [X, Y] = sets(6, 45, 51);
  const WithLogVar e(make_estimator("pos", X, Y), log_of_squares);
  const simd::Isa saved = simd::active();
  simd::set_active(simd::Isa::Avx512);
  const PairwiseSummary a = summarize_exact_variance(e, Kernel::softmax(), X, Y, 20, 3);
  simd::set_active(simd::Isa::Scalar);
  const PairwiseSummary b = summarize_exact_variance(e, Kernel::softmax(), X, Y, 20, 3);
  simd::set_active(saved);
  EXPECT_GE(a.n_exact, 1u);
  EXPECT_EQ(a.n_exact, b.n_exact);
  for (const auto& [u, v] :
       {std::pair{a.log_var, b.log_var}, {a.log_rel_var, b.log_rel_var}, {a.log_kernel, b.log_kernel}}) {
    EXPECT_EQ(u.n, v.n);
    EXPECT_EQ(u.mean, v.mean);
    EXPECT_EQ(u.m2, v.m2);
  }
}

TEST(Pairwise, NanLogVarianceNamesItsPair) {
  const auto [X, Y] = sets(4, 10, 10);
  // NaN at pair (2, 3), else PosRF's log-variance: the summary must name that pair.
  const auto pos = make_estimator("pos", X, Y);
  const WithLogVar e(make_estimator("pos", X, Y), [&](const PairGram& g) {
    arma::mat r = pos->log_var_over_k2(g.X, g.Y);
    if (r.n_rows > 2 && r.n_cols > 3) r(2, 3) = arma::datum::nan;
    return r;
  });
  try {
    summarize_exact_variance(e, Kernel::softmax(), X, Y, 256);
    FAIL() << "a NaN log-variance went through";
  } catch (const NumericalError& err) {
    EXPECT_NE(std::string(err.what()).find("(x_2, y_3)"), std::string::npos) << err.what();
  }
}

TEST(Pairwise, SeveralEstimatorsShareTilesWithTheBitsOfOneAtATime) {
  // summarize_exact_variances forms each tile's Gram product and kernel once for all estimators: every summary must
  // have the bits of its own call, and an estimator failing on every tile (NaN at each tile's entry (2, 3)) must
  // report the first tile's pair, (x_2, y_3), and leave the others untouched.
  const auto [X, Y] = sets(5, 37, 29);
  const auto pos = make_estimator("pos", X, Y);
  const WithLogVar bad(make_estimator("pos", X, Y), [&](const PairGram& g) {
    arma::mat r = pos->log_var_over_k2(g.X, g.Y);
    r(2, 3) = arma::datum::nan;
    return r;
  });
  std::vector<std::unique_ptr<Estimator>> owned;
  for (const char* name : {"trig", "pos", "oprf", "pois", "geom+"}) owned.push_back(make_estimator(name, X, Y));
  std::vector<const Estimator*> es;
  for (const auto& e : owned) es.push_back(e.get());
  es.insert(es.begin() + 2, &bad);
  const std::vector<arma::uword> Ms = {1, 4, 1, 2, 1, 3};
  const std::vector<SummaryOrError> all = summarize_exact_variances(es, Kernel::softmax(), X, Y, 20, Ms);
  ASSERT_EQ(all.size(), es.size());
  for (std::size_t i = 0; i < es.size(); ++i) {
    if (es[i] == &bad) {
      ASSERT_TRUE(all[i].error);
      try {
        std::rethrow_exception(all[i].error);
      } catch (const NumericalError& err) {
        EXPECT_NE(std::string(err.what()).find("(x_2, y_3)"), std::string::npos) << err.what();
      }
      continue;
    }
    ASSERT_FALSE(all[i].error) << es[i]->info().name;
    const PairwiseSummary one = summarize_exact_variance(*es[i], Kernel::softmax(), X, Y, 20, Ms[i]);
    const PairwiseSummary& s = all[i].summary;
    EXPECT_EQ(s.n_exact, one.n_exact) << es[i]->info().name;
    for (const auto& [u, v] :
         {std::pair{s.log_var, one.log_var}, {s.log_rel_var, one.log_rel_var}, {s.log_kernel, one.log_kernel}}) {
      EXPECT_EQ(u.n, v.n) << es[i]->info().name;
      EXPECT_EQ(u.mean, v.mean) << es[i]->info().name;
      EXPECT_EQ(u.m2, v.m2) << es[i]->info().name;
    }
  }
}

TEST(PairGram, SharedProductGivesTheDirectFormsBitForBit) {
  const auto [X, Y] = sets(7, 23, 19);
  const PairGram g(X, Y);
  const double* first = g.xy().memptr();
  for (const Kernel k : {Kernel::softmax(), Kernel::gaussian(), Kernel{0.3}})
    EXPECT_TRUE(arma::approx_equal(log_kernel(k, g), log_kernel(k, X, Y), "absdiff", 0.0)) << k.name();
  for (const double s : {1.0, -1.0, 0.5})
    EXPECT_TRUE(arma::approx_equal(pairwise_sq_norm_sum(g, s), pairwise_sq_norm_sum(X, Y, s), "absdiff", 0.0)) << s;
  EXPECT_EQ(g.xy().memptr(), first);  // formed once
  // Cancelling entries are recomputed directly: exactly 0 at y = -x (s = +1) and y = x (s = -1, the Gaussian kernel).
  EXPECT_EQ(pairwise_sq_norm_sum(g, 1.0)(0, 0), 0.0);
  EXPECT_EQ(pairwise_sq_norm_sum(g, -1.0)(1, 1), 0.0);
  EXPECT_EQ(log_kernel(Kernel::gaussian(), g)(1, 1), 0.0);
  for (const char* name : {"pos", "trig", "gerf", "aderf", "hrf-angular"}) {
    const auto e = make_estimator(name, X, Y);
    EXPECT_TRUE(arma::approx_equal(e->log_var_over_k2_m(g, 3), e->log_var_over_k2_m(X, Y, 3), "absdiff", 0.0)) << name;
  }
}

TEST(PairGram, NonFinitePointsAreRefused) {
  arma::mat X = test::points(3, 4, 1, 5);
  const arma::mat Y = test::points(3, 4, 1, 6);
  const auto e = make_estimator("pos", X, Y);
  for (const double bad : {arma::datum::nan, arma::datum::inf, -arma::datum::inf}) {
    X(2, 3) = bad;
    EXPECT_THROW(e->log_var_over_k2_m(PairGram(X, Y), 1), InvalidArgument) << bad;
  }
}

TEST(PairGram, OnlyCancellingEntriesAreRecomputed) {
  // |x + s y|^2 is the Gram form m + 2 s x^T y (one rounding: 2 s x^T y is exact) except where it is below m / 64,
  // m = |x|^2 + |y|^2, which is summed directly. HEAD before issue #19's round 2 also recomputed other entries of such
  // tiles, but only as compiled in its target clones (a GCC 12 code-generation effect): this pins the rule.
  int cancelling = 0;
  for (const arma::uword d : {2u, 3u, 5u}) {
    const arma::mat X = test::points(d, 37, 1.0, 81), Y = test::points(d, 40, 1.0, 82);
    const arma::mat G = X.t() * Y;
    const arma::rowvec x2 = arma::sum(arma::square(X), 0), y2 = arma::sum(arma::square(Y), 0);
    for (const double s : {1.0, -1.0}) {
      const arma::mat S = pairwise_sq_norm_sum(X, Y, s);
      for (arma::uword j = 0; j < S.n_cols; ++j)
        for (arma::uword i = 0; i < S.n_rows; ++i) {
          const double m = x2[i] + y2[j], gram = m + 2 * s * G(i, j);
          if (gram >= m / 64) {
            EXPECT_EQ(S(i, j), gram) << "d = " << d << ", s = " << s << ", pair " << i << ", " << j;
          } else {
            ++cancelling;
            const double direct = arma::accu(arma::square(X.col(i) + s * Y.col(j)));
            EXPECT_NEAR(S(i, j), direct, 1e-15 * m) << "d = " << d << ", s = " << s << ", pair " << i << ", " << j;
          }
        }
    }
  }
  EXPECT_GT(cancelling, 0) << "the check needs cancelling entries";
}
