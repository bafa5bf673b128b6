// LUNA learned feature maps (LUNA section 3.2 eq. 11, section 5.4 variants): the RFF starting point, positive
// definiteness of the induced Gram matrix, autodiff gradients against finite differences, training lowering both
// objectives deterministically, exact JSON/HDF5 round trips, the Estimator adapter, and bad inputs.
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <type_traits>

#include "core/error.hpp"
#include "estimators/luna/fit.hpp"
#include "estimators/luna/luna.hpp"
#include "io/hdf5.hpp"
#include "io/luna_file.hpp"
#include "kestrel_paths.hpp"
#include "tasks/classification.hpp"
#include "test_util.hpp"

namespace kestrel {
namespace {

constexpr double kEps = std::numeric_limits<double>::epsilon();
const LunaVariant kAll[] = {LunaVariant::FixedRff, LunaVariant::BankCoef, LunaVariant::Gated, LunaVariant::Ungated};

// A generic parameter point: the initial map with every parameter perturbed by N(0, 0.3^2).
LunaParams perturbed(LunaVariant v, arma::uword d, arma::uword M, std::uint64_t seed) {
  LunaParams p = luna_init(v, d, M, {.channels = 4, .seed = seed});
  Rng rng(seed, Stream::User, 7);
  p.W += 0.3 * rng.normal_matrix(p.P(), d);
  p.b += 0.3 * arma::vec(rng.normal_matrix(p.P(), 1));
  p.u += 0.3 * arma::vec(rng.normal_matrix(p.h(), 1));
  p.v += 0.3 * arma::vec(rng.normal_matrix(p.h(), 1));
  p.A += 0.3 * rng.normal_matrix(p.C(), p.h());
  p.gate_w = 0.3 * arma::vec(rng.normal_matrix(d, 1));
  p.gate_gamma = -0.2;
  return p;
}

arma::uvec labels_of(const arma::mat& X) {  // two classes split by a direction, a third by a radius
  arma::uvec y(X.n_cols);
  for (arma::uword i = 0; i < X.n_cols; ++i) y(i) = arma::norm(X.col(i)) > 1.6 ? 2 : (X(0, i) > 0 ? 1 : 0);
  return y;
}

TEST(Luna, InitialMapIsTheRandomFourierFeatureMapOfTheGaussianKernel) {
  const arma::mat X = test::points(3, 6, 0.7, 1), Y = test::points(3, 5, 0.7, 2);
  for (LunaVariant v : kAll) {
    const LunaParams p = luna_init(v, 3, 32, {.channels = 4, .seed = 5});
    const arma::mat est = luna_features(p, X) * luna_features(p, Y).t();
    for (arma::uword i = 0; i < X.n_cols; ++i)
      for (arma::uword j = 0; j < Y.n_cols; ++j) {
        const double rff = arma::mean(arma::cos(p.W * (X.col(i) - Y.col(j))));
        // Both sides are sums of O(M) terms of size <= 1: rounding error well below 1e-13.
        EXPECT_NEAR(est(i, j), rff, 1e-13) << to_string(v) << " pair " << i << "," << j;
      }
  }
}

TEST(Luna, GramMatrixIsPositiveSemidefinite) {
  const arma::mat X = test::points(4, 60, 1.0, 3);
  for (LunaVariant v : kAll) {
    const LunaParams p = perturbed(v, 4, 32, 11);
    const arma::mat F = luna_features(p, X);
    const arma::mat G = F * F.t();  // k(x_i, x_j) = phi(x_i)^T phi(x_j)
    // A Gram matrix is PSD exactly; computed in floating point, G and its eigenvalues carry rounding errors
    // bounded by about n eps ||G||_2 (Golub & Van Loan, backward stability of the symmetric QR algorithm);
    // tol is 10x that. Rank M = 32 < n = 60, so many exact eigenvalues are 0 and rounding shows up at the bound.
    const arma::vec ev = arma::eig_sym(0.5 * (G + G.t()));
    const double tol = 10.0 * G.n_rows * kEps * ev.max();
    EXPECT_GE(ev.min(), -tol) << to_string(v);
    EXPECT_GT(ev.max(), 0.0) << to_string(v);
  }
}

// Central differences of f at theta along coordinate k: the truncation error is h^2 f'''/6 + O(h^4) and the
// rounding error about eps |f| / h. With fd(h) and fd(2h), Richardson gives truncation(h) ~ |fd(2h) - fd(h)| / 3,
// so the tolerance is 10 x (that estimate + 4 eps |f| / h), plus 1e-7 relative to the gradient's size for the
// O(h^4) rest. Returns the number of checked coordinates where g disagrees with the differences.
int fd_mismatches(const LunaObjective& o, const arma::vec& theta, const arma::vec& g, const std::string& what,
                  bool report) {
  const double f0 = o.value(theta), h = 1e-4, gscale = arma::abs(g).max();
  // Every coordinate for small problems; an evenly spread subsample of about 60 otherwise.
  const arma::uword step = std::max<arma::uword>(1, theta.n_elem / 60);
  int bad = 0;
  for (arma::uword k = 0; k < theta.n_elem; k += step) {
    auto fd = [&](double hh) {
      arma::vec a = theta, b = theta;
      a(k) += hh, b(k) -= hh;
      return (o.value(a) - o.value(b)) / (2 * hh);
    };
    const double fd1 = fd(h), fd2 = fd(2 * h);
    const double tol = 10.0 * (std::abs(fd2 - fd1) / 3.0 + 4 * kEps * std::abs(f0) / h) + 1e-7 * gscale;
    if (std::abs(g(k) - fd1) > tol) {
      ++bad;
      if (report)
        ADD_FAILURE() << what << " coordinate " << k << " of " << theta.n_elem << ": gradient " << g(k)
                      << ", finite differences " << fd1 << ", tolerance " << tol;
    }
  }
  return bad;
}

TEST(Luna, GradientMatchesFiniteDifferences) {
  const arma::mat X = test::points(3, 30, 0.6, 4);
  for (LunaVariant v : {LunaVariant::BankCoef, LunaVariant::Gated, LunaVariant::Ungated}) {
    const LunaParams p = perturbed(v, 3, 16, 21);
    const auto kf = LunaObjective::kernel_fit(p, X, random_pairs(X.n_cols, 120, 3));
    const auto tf = LunaObjective::task_fit(p, X, labels_of(X), 3);
    for (const auto* o : {&kf, &tf}) {
      const std::string what = (o == &kf ? "kernel fit " : "task fit ") + to_string(v);
      const arma::vec theta = o->initial();
      arma::vec g;
      const double f = o->value_and_gradient(theta, g);
      ASSERT_EQ(g.n_elem, theta.n_elem);
      EXPECT_NEAR(f, o->value(theta), 1e-12 * std::abs(f)) << what;
      EXPECT_EQ(fd_mismatches(*o, theta, g, what, true), 0) << what;
      // Negative control: the same tolerance rejects a gradient that is 2% off.
      EXPECT_GT(fd_mismatches(*o, theta, 1.02 * g, what, false), 0) << what;
    }
  }
}

// The hand-written reverse-mode gradient against Ceres' automatic differentiation, which differentiates the same
// code exactly: the two differ only in rounding. Each gradient entry is a sum of at most n P (C h + d) products,
// so 1e-10 of the largest entry (about 5e5 eps) bounds the rounding of either; a 1e-6 relative error in any one
// coordinate fails (negative control).
TEST(Luna, GradientMatchesAutodiff) {
  const arma::mat X = test::points(5, 40, 0.7, 6);
  for (LunaVariant v : {LunaVariant::BankCoef, LunaVariant::Gated, LunaVariant::Ungated}) {
    const LunaParams p = perturbed(v, 5, 24, 31);
    const auto kf = LunaObjective::kernel_fit(p, X, random_pairs(X.n_cols, 300, 4));
    const auto tf = LunaObjective::task_fit(p, X, labels_of(X), 3);
    for (const auto* o : {&kf, &tf}) {
      const std::string what = (o == &kf ? "kernel fit " : "task fit ") + to_string(v);
      arma::vec theta = o->initial();
      theta += 0.05 * arma::vec(test::points(1, theta.n_elem, 1.0, 7).t());  // away from the initial map
      arma::vec ga, gr;
      const double fa = o->value_and_gradient_autodiff(theta, ga), fr = o->value_and_gradient(theta, gr);
      EXPECT_NEAR(fa, fr, 1e-12 * std::abs(fr)) << what;  // the same code; Jets may contract to FMA differently
      EXPECT_EQ(fr, o->value(theta)) << what;
      const double tol = 1e-10 * arma::abs(ga).max();
      EXPECT_LE(arma::abs(gr - ga).max(), tol) << what;
      arma::vec off = gr;
      off(off.n_elem / 2) += 1e-6 * arma::abs(ga).max();
      EXPECT_GT(arma::abs(off - ga).max(), tol) << what;
    }
  }
}

TEST(Luna, TrainingLowersBothObjectivesAndIsDeterministic) {
  const arma::mat X = test::points(3, 60, 0.6, 5);
  const arma::umat pairs = random_pairs(X.n_cols, 400, 9);
  for (LunaVariant v : {LunaVariant::BankCoef, LunaVariant::Gated, LunaVariant::Ungated}) {
    const LunaParams p0 = luna_init(v, 3, 16, {.channels = 4, .seed = 2});
    const auto kf = LunaObjective::kernel_fit(p0, X, pairs);
    const auto r1 = train_luna(kf, {.iterations = 30});
    EXPECT_LT(r1.final_objective, 0.9 * r1.initial_objective) << to_string(v) << ": " << r1.termination;
    // The objective is the relative MSE over the training pairs, recomputed here from the trained map.
    const arma::mat F = luna_features(r1.params, X);
    const arma::mat K = arma::exp(log_kernel(Kernel::gaussian(), X, X));
    double mse = 0;
    for (arma::uword q = 0; q < pairs.n_cols; ++q)
      mse += std::pow(arma::dot(F.row(pairs(0, q)), F.row(pairs(1, q))) / K(pairs(0, q), pairs(1, q)) - 1.0, 2);
    EXPECT_NEAR(r1.final_objective, mse / pairs.n_cols, 1e-10 * r1.final_objective) << to_string(v);
    const auto r2 = train_luna(kf, {.iterations = 30});
    EXPECT_TRUE(arma::all(arma::vectorise(r1.params.W == r2.params.W))) << to_string(v);
    EXPECT_EQ(r1.final_objective, r2.final_objective);

    const auto tf = LunaObjective::task_fit(p0, X, labels_of(X), 3);
    const auto t1 = train_luna(tf, {.iterations = 30});
    EXPECT_LT(t1.final_objective, t1.initial_objective) << to_string(v) << ": " << t1.termination;
  }
  // FixedRff has nothing to learn: training returns the initial map.
  const LunaParams f0 = luna_init(LunaVariant::FixedRff, 3, 16, {.seed = 2});
  const auto rf = train_luna(LunaObjective::kernel_fit(f0, X, pairs));
  EXPECT_EQ(rf.final_objective, rf.initial_objective);
  EXPECT_TRUE(arma::all(arma::vectorise(rf.params.W == f0.W)));
}

void expect_same(const LunaParams& a, const LunaParams& b) {
  EXPECT_EQ(a.variant, b.variant);
  EXPECT_EQ(a.target_alpha, b.target_alpha);
  EXPECT_TRUE(arma::approx_equal(a.W, b.W, "absdiff", 0.0));
  EXPECT_TRUE(arma::approx_equal(a.b, b.b, "absdiff", 0.0));
  EXPECT_TRUE(arma::approx_equal(a.u, b.u, "absdiff", 0.0));
  EXPECT_TRUE(arma::approx_equal(a.v, b.v, "absdiff", 0.0));
  EXPECT_TRUE(arma::approx_equal(a.A, b.A, "absdiff", 0.0));
  EXPECT_TRUE(arma::approx_equal(a.gate_w, b.gate_w, "absdiff", 0.0));
  EXPECT_EQ(a.gate_gamma, b.gate_gamma);
}

TEST(Luna, JsonAndHdf5RoundTripsAreExact) {
  const LunaParams p = perturbed(LunaVariant::Gated, 5, 24, 31);
  const LunaMap e(p);
  expect_same(luna_params_from_json(nlohmann::json::parse(e.params().dump())), p);
  const std::string file =
      (std::filesystem::temp_directory_path() / ("kestrel_luna_" + std::to_string(::getpid()) + ".h5")).string();
  {
    H5Writer h5(file);
    save_luna(h5, "/maps/gated", p);
    h5.commit();
  }
  expect_same(load_luna(file, "/maps/gated"), p);
  EXPECT_THROW(load_luna(file, "/maps/none"), IoError);
  std::filesystem::remove(file);
  EXPECT_THROW(load_luna(file, "/maps/gated"), IoError);
}

TEST(Luna, EstimatorAdapterWorksWithKernelAndClassificationCode) {
  const LunaParams p = perturbed(LunaVariant::Ungated, 3, 16, 41);
  const LunaMap e(p);
  EXPECT_EQ(e.info().name, "luna-ungated");
  const arma::mat X = test::points(3, 7, 0.8, 6), Y = test::points(3, 9, 0.8, 7);
  Rng rng(1);
  const Draw w = e.draw(16, rng, Sampler::Iid);
  EXPECT_EQ(w.count(), 0u);
  // Under the kernel it was trained for (Gaussian) the adapter returns phi itself.
  const arma::mat direct = luna_features(p, X) * luna_features(p, Y).t();
  const arma::mat via = approximate_kernel(e, w, X, Y, Kernel::gaussian());
  EXPECT_LT(arma::abs(via - direct).max(), 1e-12 * (1 + arma::abs(direct).max()));
  const arma::mat C = test::points(9, 2, 1.0, 8);
  EXPECT_LT(arma::abs(approximate_kernel_times(e, w, X, Y, C, Kernel::gaussian()) - direct * C).max(), 1e-11);
  const arma::uvec lab = labels_of(Y);
  const arma::mat s = nw_scores_rf(e, w, Y, lab, 3, X, 1.0);
  arma::mat R(9, 3, arma::fill::zeros);
  for (arma::uword i = 0; i < 9; ++i) R(i, lab(i)) = 1;
  EXPECT_LT(arma::abs(s - (direct * R).t()).max(), 1e-11);
  // A deterministic map has no variance to report: it is a FeatureMap, not an Estimator.
  static_assert(!std::is_base_of_v<Estimator, LunaMap>);
  EXPECT_THROW(e.draw(8, rng, Sampler::Iid), InvalidArgument);
  EXPECT_THROW(e.features(Draw{arma::mat(3, 2, arma::fill::zeros), {}}, X, Side::Query), InvalidArgument);
  // exp(|x|^2 / 2) overflows for |x|^2 > 1419: a clear error instead of inf * 0.
  EXPECT_THROW(e.features(w, arma::mat(3, 1, arma::fill::value(30.0)), Side::Query), NumericalError);
}

TEST(Luna, BadInputsThrowNamingTheValue) {
  EXPECT_THROW(luna_init(LunaVariant::Ungated, 3, 30, {.channels = 4}), InvalidArgument);  // 30 % 4 != 0
  EXPECT_THROW(luna_init(LunaVariant::Ungated, 0, 16), InvalidArgument);
  EXPECT_THROW(luna_init(LunaVariant::Ungated, 3, 0), InvalidArgument);
  EXPECT_THROW(luna_init(LunaVariant::Ungated, 3, 16, {.channels = 1}), InvalidArgument);
  EXPECT_THROW(parse_luna_variant("gate"), InvalidArgument);
  const LunaParams p = luna_init(LunaVariant::Ungated, 3, 16);
  arma::mat X = test::points(3, 10, 1.0, 9);
  EXPECT_THROW(luna_features(p, test::points(4, 10, 1.0, 9)), InvalidArgument);
  EXPECT_THROW(luna_features(p, arma::mat(3, 0)), InvalidArgument);
  X(1, 2) = arma::datum::nan;
  EXPECT_THROW(luna_features(p, X), InvalidArgument);
  const arma::mat Z = test::points(3, 10, 1.0, 9);
  EXPECT_THROW(LunaObjective::kernel_fit(p, Z, arma::umat(2, 1, arma::fill::zeros)), InvalidArgument);  // self pair
  EXPECT_THROW(LunaObjective::kernel_fit(p, Z, arma::umat(arma::uvec{0, 10})), InvalidArgument);        // out of range
  EXPECT_THROW(LunaObjective::task_fit(p, Z, arma::uvec(10, arma::fill::value(3)), 3), InvalidArgument);
  LunaParams bad = p;
  bad.b.resize(3);
  EXPECT_THROW(LunaMap{bad}, InvalidArgument);
  bad = p;
  bad.A(0, 0) = arma::datum::inf;
  EXPECT_THROW(luna_features(bad, Z), InvalidArgument);
  EXPECT_THROW(luna_params_from_json(nlohmann::json{{"variant", "ungated"}}), InvalidArgument);
  EXPECT_THROW(random_pairs(1, 5, 1), InvalidArgument);
}

TEST(Luna, CliVarianceRejectsLearnedMapsClearly) {
  const std::string cmd =
      std::string(KESTREL_CLI) + " variance --dim 4 --points 8 --pairs 1 --quiet --estimators luna-ungated 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  const int rc = pclose(p);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("learned deterministic feature map"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;  // one line
}

}  // namespace
}  // namespace kestrel
