// DERF family (DERF paper section 4): Thm 4.1 validity and eq. (9) against Monte Carlo; the closed-form
// fits ADERF (Thm 4.2), SDERF (Thm 4.3), SADERF (section 4.3) are valid, optimal against valid
// perturbations and no worse than GERF (= kestrel's oprf); closed-form objectives (8), (10), (11), (12)
// equal the exact all-pairs objective; singular M1/M2; bad input; d = 64 stress.
// Monte Carlo threshold: 4.5 standard errors (test_util.hpp); each test states its checks and the
// union-bound false-failure rate. Deterministic comparisons allow only rounding (relative 1e-9 of
// objectives that are sums of <= 10^4 terms of size <= 10^2, i.e. ~10^4 times the worst-case rounding).
#include <gtest/gtest.h>

#include "analysis/montecarlo.hpp"
#include "analysis/objective.hpp"
#include "core/error.hpp"
#include "core/logmath.hpp"
#include "data/regimes.hpp"
#include "estimators/derf/derf.hpp"
#include "estimators/derf/objective.hpp"
#include "estimators/gerf/gerf.hpp"
#include "estimators/gerf/objective.hpp"
#include "estimators/registry.hpp"
#include "test_util.hpp"

using namespace kestrel;
using cplx = std::complex<double>;

namespace {

constexpr double kRound = 1e-9;  // relative rounding allowance for deterministic comparisons
double slack(double f) { return kRound * std::max(1.0, std::abs(f)); }

// A random valid general DERF: symmetric non-diagonal A with eigenvalues in [-0.3, 0.03] (so that
// I - 32A > 0 and the Monte Carlo 8th moments are finite), B1 = I + 0.3 G, the rest by Thm 4.1.
DerfParams random_derf(arma::uword d, std::uint64_t seed) {
  Rng rng(seed, Stream::User, 7);
  const arma::mat Q = haar_orthogonal(d, rng);
  arma::vec a(d);
  for (arma::uword l = 0; l < d; ++l) a(l) = -0.3 + 0.33 * rng.uniform();
  const arma::mat A = Q * arma::diagmat(a) * Q.t();
  const arma::mat B1 = arma::eye(d, d) + 0.3 * rng.normal_matrix(d, d);
  return derf_from_a_b1(A, B1);
}

// The DERF-paper GERF (oprf) as a DERF: A = a I, B = sqrt(1-4a) I, C = -I/2, D = (1-4a)^(d/4).
DerfParams gerf_as_derf(double a, arma::uword d) {
  DerfParams p;
  p.A = a * arma::eye(d, d);
  p.B1 = std::sqrt(1 - 4 * a) * arma::eye(d, d);
  p.B2 = p.B1;
  p.C1 = -0.5 * arma::eye(d, d);
  p.C2 = p.C1;
  p.log_D = 0.25 * d * std::log1p(-4 * a);
  return p;
}

DerfStats ridged(DerfStats st, double e1, double e2) {
  st.M1 += e1 * arma::eye(st.d, st.d);
  st.M2 += e2 * arma::eye(st.d, st.d);
  return st;
}

// Anisotropic and asymmetric pair: coordinate scales from 0.1 to 1.5 for x, reversed for y, y shifted.
SetPair aniso_pair(arma::uword d, arma::uword L, std::uint64_t seed) {
  Rng rng(seed, Stream::User, 3);
  const arma::vec sx = arma::linspace(0.1, 1.5, d), sy = arma::reverse(sx);
  SetPair p{arma::diagmat(sx) * rng.normal_matrix(d, L), arma::diagmat(sy) * rng.normal_matrix(d, L)};
  p.Y += 0.3;
  return p;
}

std::vector<std::pair<std::string, SetPair>> venn_sets(arma::uword d, arma::uword L) {
  std::vector<std::pair<std::string, SetPair>> v;
  for (const char* r : {"normal", "sphere", "heterogen"})
    for (double sigma : {0.5, 1.0})
      v.push_back(
          {fmt::format("{}/{}", r, sigma), draw_regime({.name = r, .dim = d, .points = L, .sigma = sigma, .seed = 5})});
  v.push_back({"aniso", aniso_pair(d, L, 6)});
  return v;
}

double exact_objective(const DerfParams& p, const arma::mat& X, const arma::mat& Y, double tol = 1e-9) {
  return shifted_log_variance_objective(DerfEstimator("perturbed", p, {}, tol), X, Y);
}

}  // namespace

TEST(Derf, Eq9RewriteEqualsPrintedFormula) {
  // derf_second_moment's cancellation-free form against eq. (9) as printed (with the given C, D).
  const DerfParams p = random_derf(4, 1);
  const DerfSecondMoment f = derf_second_moment(p);
  const arma::mat I = arma::eye(4, 4);
  const arma::mat P8 = arma::inv_sympd(I - 8 * p.A);
  const arma::mat X = test::points(4, 5, 0.7, 2), Y = test::points(4, 5, 0.7, 3);
  for (arma::uword i = 0; i < 5; ++i) {
    const arma::vec x = X.col(i), y = Y.col(i);
    const double printed = 4 * p.log_D - 0.5 * arma::log_det_sympd(I - 8 * p.A) +
                           2 * arma::as_scalar(x.t() * (p.C1 + p.B1.t() * P8 * p.B1) * x) +
                           2 * arma::as_scalar(y.t() * (p.C2 + p.B2.t() * P8 * p.B2) * y) +
                           4 * arma::as_scalar(x.t() * p.B1.t() * P8 * p.B2 * y);
    const double ours = f.c0 + std::pow(arma::norm(f.TB1 * x + f.TB2 * y), 2) + 2 * arma::dot(x, y);
    EXPECT_NEAR(ours, printed, slack(printed)) << "pair " << i;
  }
  EXPECT_GE(f.c0, 0.0);
}

TEST(Derf, FeaturesEqualTheDefinitionEntryByEntry) {
  const DerfParams p = random_derf(3, 4);
  const DerfEstimator e("derf", p);
  Rng rng(5);
  const Draw w = e.draw(7, rng, Sampler::Orthogonal);
  const arma::mat X = test::points(3, 4, 0.5, 6);
  for (Side side : {Side::Query, Side::Key}) {
    const arma::mat F = e.features(w, X, side);
    const arma::mat& B = side == Side::Query ? p.B1 : p.B2;
    const arma::mat& C = side == Side::Query ? p.C1 : p.C2;
    for (arma::uword i = 0; i < X.n_cols; ++i)
      for (arma::uword m = 0; m < w.count(); ++m) {
        const arma::vec om = w.omega.col(m), x = X.col(i);
        const double ref =
            std::exp(p.log_D + arma::as_scalar(om.t() * p.A * om + om.t() * B * x + x.t() * C * x)) / std::sqrt(7.0);
        EXPECT_NEAR(F(i, m), ref, 1e-12 * ref);
      }
  }
}

TEST(Derf, ExactVarianceMatchesMonteCarlo) {
  // aderf, sderf, saderf fitted on 40-point anisotropic sets, and a random valid general DERF with
  // non-diagonal A; checked on 3 x 3 pairs. 4 estimators x 9 entries x 2 checks (mean, variance) = 72
  // checks at 4.5 se: false-failure rate <= 72 * 6.8e-6 = 4.9e-4.
  const SetPair sp = aniso_pair(3, 40, 21);
  const arma::mat X = 0.3 * sp.X, Y = 0.3 * sp.Y;
  std::vector<std::unique_ptr<Estimator>> es;
  for (const char* n : {"aderf", "sderf", "saderf"}) es.push_back(make_estimator(n, X, Y));
  es.push_back(std::make_unique<DerfEstimator>("derf", random_derf(3, 8)));
  const arma::mat Xs = X.cols(0, 2), Ys = Y.cols(0, 2);
  for (const auto& e : es) {
    const MonteCarloResult r = simulate(*e, Kernel::softmax(), Xs, Ys, {20000, 1, 301, Sampler::Iid});
    test::expect_moments(*e, Kernel::softmax(), Xs, Ys, r);
  }
}

TEST(Derf, InvalidParametersAreBiasedSoTheValidityCheckMatters) {
  // Negative control: B2 off by 10% violates B1^T (I-4A)^-1 B2 = I; the estimator then misses K by
  // far more than 4.5 se on the 9 entries (x^T y != 0). The estimator is built with a loose tolerance.
  DerfParams p = random_derf(3, 8);
  p.B2 *= 1.1;
  const DerfEstimator e("bad", p, {}, 1.0);
  const arma::mat X = test::points(3, 3, 0.5, 31), Y = test::points(3, 3, 0.5, 32) + 0.3;
  const MonteCarloResult r = simulate(e, Kernel::softmax(), X, Y, {20000, 1, 302, Sampler::Iid});
  const arma::mat z = arma::abs(r.kernel.mean - r.kernel.exact) / r.kernel.se_mean;
  EXPECT_GE(arma::accu(z > test::kSigmas), 5u) << z;
  EXPECT_THROW(validate(p), InvalidArgument);
}

TEST(Derf, FittedParametersSatisfyTheorem41AndPrintedB2IsCorrect) {
  for (const auto& [name, sp] : venn_sets(8, 64)) {
    const DerfStats st = derf_stats(sp.X, sp.Y);
    for (double ridge : {0.0, 1e-8}) {
      const AderfFit a = fit_aderf(st, {ridge});
      EXPECT_NO_THROW(validate(a.params)) << name;
      EXPECT_LE(a.A, 0.0) << name;
      // Thm 4.2's printed B2 equals (1-4A) B1^-T (Thm 4.1 / eq. 20).
      const DerfParams q = derf_from_a_b1(a.params.A, a.params.B1);
      EXPECT_LT(arma::abs(q.B2 - a.params.B2).max(), 1e-9 * arma::abs(q.B2).max()) << name;
      EXPECT_NO_THROW(validate(fit_saderf(st, {ridge}).params)) << name;
    }
    const SderfFit s = fit_sderf(st);
    EXPECT_NO_THROW(validate(s.params)) << name;
    EXPECT_LE(s.a.max(), 0.0) << name;
  }
}

TEST(Objective, ClosedFormsEqualExactAllPairs) {
  // L_x = 64, L_y = 50 and block 24 exercise partial tiles. Every closed form of objective.hpp against
  // shifted_log_variance_objective over all 3200 pairs.
  for (const auto& [name, sp0] : venn_sets(6, 64)) {
    const arma::mat X = sp0.X, Y = sp0.Y.cols(0, 49);
    const DerfStats st = derf_stats(X, Y);
    const HomogeneityStats hs = homogeneity_stats(X, Y);
    auto exact = [&](const Estimator& e) { return shifted_log_variance_objective(e, X, Y, 24); };

    const GerfParams g = fit_oprf(hs);
    const double f_oprf = exact(*make_estimator("oprf", X, Y));
    EXPECT_NEAR(gerf_shifted_objective(g, hs), f_oprf, slack(f_oprf)) << name;
    EXPECT_NEAR(derf_objective(gerf_as_derf(g.A.real(), 6), st), f_oprf, slack(f_oprf)) << name;

    const AderfFit a = fit_aderf(st, {0.0});
    const double f_a = exact(DerfEstimator("aderf", a.params));
    EXPECT_NEAR(aderf_objective(a), f_a, slack(f_a)) << name;  // eq. (10)
    EXPECT_NEAR(derf_objective(a.params, st), f_a, slack(f_a)) << name;

    const SderfFit s = fit_sderf(st);
    const double f_s = exact(DerfEstimator("sderf", s.params));
    EXPECT_NEAR(sderf_objective(s, st), f_s, slack(f_s)) << name;  // eq. (11)
    EXPECT_NEAR(derf_objective(s.params, st), f_s, slack(f_s)) << name;

    const SaderfFit sa = fit_saderf(st, {0.0});
    const double f_sa = exact(DerfEstimator("saderf", sa.params));
    EXPECT_NEAR(saderf_objective(sa), f_sa, slack(f_sa)) << name;  // eq. (12)

    const DerfParams r = random_derf(6, 9);
    const double f_r = exact(DerfEstimator("derf", r));
    EXPECT_NEAR(derf_objective(r, st), f_r, slack(f_r)) << name;

    // With the default ridge, eq. (10) is the regularised optimum: it equals (8) on ridged statistics.
    const AderfFit ar = fit_aderf(st);
    const double f_ar = aderf_objective(ar);
    EXPECT_NEAR(derf_objective(ar.params, ridged(st, ar.eps1, ar.eps2)), f_ar, slack(f_ar)) << name;
  }
}

TEST(Derf, OptimaAreNotImprovedByValidPerturbations) {
  // For each family, 30 random perturbations of relative size 1e-3 that stay inside the family's valid
  // set (Thm 4.1) must not lower the exact objective (8) beyond rounding. The optima have flat
  // directions (e.g. B1 -> O B1 for ADERF), so a perturbation may tie; the test also requires that
  // at least a third of them strictly increase it, so that it has power.
  for (const auto& [name, sp] : venn_sets(5, 48)) {
    const arma::mat &X = sp.X, &Y = sp.Y;
    const DerfStats st = derf_stats(X, Y);
    const arma::uword d = st.d;
    Rng rng(17);
    const double h = 1e-3;
    int worse_a = 0, worse_s = 0, worse_sa = 0;

    const AderfFit a = fit_aderf(st, {0.0});
    const double fa = exact_objective(a.params, X, Y);
    const SderfFit s = fit_sderf(st);
    const double fs = exact_objective(s.params, X, Y);
    const SaderfFit sa = fit_saderf(st, {0.0});
    const double fsa = exact_objective(sa.params, X, Y);
    for (int k = 0; k < 30; ++k) {
      // ADERF: A -> A + delta (scalar), B1 -> B1 (I + h G); B2, C, D by Thm 4.1.
      const double A2 = a.A + h * std::max(std::abs(a.A), 0.01) * rng.normal();
      const arma::mat B1 = a.params.B1 * (arma::eye(d, d) + h * rng.normal_matrix(d, d));
      const double f1 = exact_objective(derf_from_a_b1(A2 * arma::eye(d, d), B1), X, Y);
      EXPECT_GE(f1, fa - slack(fa)) << name << " ADERF perturbation " << k;
      worse_a += f1 > fa + slack(fa);

      // SDERF: A -> A + h sym(G) (any symmetric A), B = (I-4A)^1/2 Cayley(h K) Q3^T.
      arma::mat G = rng.normal_matrix(d, d);
      const arma::mat As = s.params.A + h * 0.05 * (G + G.t());
      arma::mat K = rng.normal_matrix(d, d);
      K = h * (K - K.t());
      const arma::mat I = arma::eye(d, d);
      const arma::mat R = arma::solve(I - K, I + K);  // orthogonal
      arma::vec ev;
      arma::mat V;
      arma::eig_sym(ev, V, I - 4 * As);
      const arma::mat sqrt_p = V * arma::diagmat(arma::sqrt(ev)) * V.t();
      const arma::mat Bs = sqrt_p * R * (arma::diagmat(1 / arma::sqrt(1 - 4 * s.a)) * s.params.B1);
      const double f2 = exact_objective(derf_from_a_b1(As, Bs), X, Y);
      EXPECT_GE(f2, fs - slack(fs)) << name << " SDERF perturbation " << k;
      worse_s += f2 > fs + slack(fs);

      // SADERF: Psi -> Psi exp(h g), A -> A + delta.
      const arma::vec psi = sa.psi % arma::exp(h * rng.normal_matrix(d, 1));
      const double a3 = sa.gerf.A.real() + h * std::max(std::abs(sa.gerf.A.real()), 0.01) * rng.normal();
      const double f3 = exact_objective(derf_from_a_b1(a3 * I, std::sqrt(1 - 4 * a3) * arma::diagmat(psi)), X, Y);
      EXPECT_GE(f3, fsa - slack(fsa)) << name << " SADERF perturbation " << k;
      worse_sa += f3 > fsa + slack(fsa);
    }
    EXPECT_GE(worse_a, 10) << name;
    EXPECT_GE(worse_s, 10) << name;
    EXPECT_GE(worse_sa, 10) << name;
  }
}

TEST(Derf, ProofOfTheorem42PhiWithoutFactor2IsWorse) {
  // Appendix A.3 applies Lemma A.1 with phi = mean(Sigma) + mu3; eq. (32) has 2(...)/(1-8A), so the
  // theorem's phi = 2 mean(Sigma) + 2 mu3 is right. The proof's phi gives a strictly larger objective.
  for (const auto& [name, sp] : venn_sets(6, 64)) {
    const DerfStats st = derf_stats(sp.X, sp.Y);
    const AderfFit a = fit_aderf(st, {0.0});
    const double A_half = lemma_a1_minimiser(a.phi / 2);
    const arma::mat B1 = std::sqrt((1 - 4 * A_half) / (1 - 4 * a.A)) * a.params.B1;  // E* for that A
    const double f_star = derf_objective(a.params, st);
    const double f_half = derf_objective(derf_from_a_b1(A_half * arma::eye(6, 6), B1), st);
    EXPECT_GT(f_half, f_star + slack(f_star)) << name;
  }
}

TEST(Derf, LemmaA1MinimiserMatchesPrintedFormAndGrid) {
  for (double phi : {0.0, 1e-6, 0.3, 2.0, 50.0, 1e4}) {
    const double A = lemma_a1_minimiser(phi);
    const double printed = (1 - 2 * phi - std::sqrt((2 * phi + 1) * (2 * phi + 1) + 8 * phi)) / 16;  // eq. (15)
    EXPECT_NEAR(A, printed, 1e-12 * std::max(1.0, std::abs(printed))) << phi;
    auto f = [phi](double x) { return std::log1p(-4 * x) - 0.5 * std::log1p(-8 * x) + phi / (1 - 8 * x); };
    for (double x = -50; x < 0.1249; x += 0.0005) EXPECT_GE(f(x), f(A) - 1e-12 * std::max(1.0, std::abs(f(A))));
  }
}

TEST(Derf, VennDiagramNoFamilyIsWorseThanOprf) {
  // Figure 1 (left): GERF (oprf) is a member of ADERF, SDERF and SADERF, and SADERF of ADERF, so each
  // fitted optimum of (8) is <= oprf's. SDERF is a global optimum (no ridge). With ridge 0 ADERF <=
  // SADERF <= oprf. With the default ridge the fit minimises the ridged objective F_reg >= F, so
  // F(fit) <= F_reg(oprf) = F(oprf) + eps1 tr(G1) + eps2 tr(G2) (derf.hpp); that bound is checked.
  for (const auto& [name, sp] : venn_sets(16, 128)) {
    const arma::mat &X = sp.X, &Y = sp.Y;
    const DerfStats st = derf_stats(X, Y);
    auto F = [&](const Estimator& e) { return shifted_log_variance_objective(e, X, Y); };
    const double f_oprf = F(*make_estimator("oprf", X, Y));
    const double f_s = F(*make_estimator("sderf", X, Y));
    const double f_a = F(*make_estimator("aderf", X, Y));
    const double f_sa = F(*make_estimator("saderf", X, Y));
    EXPECT_LE(f_s, f_oprf + slack(f_oprf)) << name;

    const AderfFit a = fit_aderf(st);
    const SaderfFit sa = fit_saderf(st);
    const DerfParams og = gerf_as_derf(fit_oprf(homogeneity_stats(X, Y)).A.real(), st.d);
    EXPECT_LE(f_a, derf_objective(og, ridged(st, a.eps1, a.eps2)) + slack(f_oprf)) << name;
    EXPECT_LE(f_sa, derf_objective(og, ridged(st, sa.eps1, sa.eps2)) + slack(f_oprf)) << name;

    const double f_a0 = F(DerfEstimator("aderf", fit_aderf(st, {0.0}).params));
    const double f_sa0 = F(DerfEstimator("saderf", fit_saderf(st, {0.0}).params));
    EXPECT_LE(f_a0, f_sa0 + slack(f_sa0)) << name;
    EXPECT_LE(f_sa0, f_oprf + slack(f_oprf)) << name;
    if (name == "aniso") {  // asymmetric data: the dense families gain
      EXPECT_LT(f_a, f_oprf - 1.0) << name;
      EXPECT_LT(f_s, f_oprf) << name;
      EXPECT_LT(f_sa, f_oprf - 0.1) << name;
    }
  }
}

TEST(Derf, RankDeficientSetsGiveValidFiniteParameters) {
  // d = 8, L = 5 < d, points confined to a 3-dim subspace: M1, M2 are singular (GUIDE "Traps").
  const arma::uword d = 8, L = 5;
  Rng rng(41);
  const arma::mat basis = haar_orthogonal(d, rng).cols(0, 2), other = haar_orthogonal(d, rng).cols(0, 2);
  const arma::mat X = 0.3 * basis * rng.normal_matrix(3, L), Y = 0.3 * basis * rng.normal_matrix(3, L);
  const arma::mat Y2 = 0.3 * other * rng.normal_matrix(3, L);  // a different subspace
  const arma::mat fresh = 0.3 * basis * rng.normal_matrix(3, 7), generic = test::points(d, 7, 0.3, 42);
  for (const arma::mat* Yp : {&Y, &Y2}) {
    const DerfStats st = derf_stats(X, *Yp);
    EXPECT_THROW(fit_aderf(st, {0.0}), InvalidArgument);  // Thm 4.2 as printed needs M1, M2 nonsingular
    const HomogeneityStats hs = homogeneity_stats(X, *Yp);
    const DerfParams og = gerf_as_derf(fit_oprf(hs).A.real(), d);
    for (const char* n : {"aderf", "sderf", "saderf"}) {
      const auto e = make_estimator(n, X, *Yp);
      const auto* de = dynamic_cast<const DerfEstimator*>(e.get());
      ASSERT_NE(de, nullptr);
      EXPECT_NO_THROW(validate(de->derf_params())) << n;
      for (const auto& [A, B] : {std::pair{&X, Yp}, std::pair{&fresh, &fresh}, std::pair{&generic, &generic}}) {
        const arma::mat lv = e->log_var_over_k2(*A, *B);
        EXPECT_FALSE(lv.has_nan()) << n;
        EXPECT_LT(lv.max(), arma::datum::inf) << n;  // -inf (exact pairs) is allowed
      }
      const double f = shifted_log_variance_objective(*e, X, *Yp);
      EXPECT_TRUE(std::isfinite(f)) << n;
      // The ridged fit is still no worse than oprf's objective plus its ridge penalty (derf.hpp).
      if (std::string(n) == "aderf") {
        const AderfFit a = fit_aderf(st);
        EXPECT_LE(f, derf_objective(og, ridged(st, a.eps1, a.eps2)) + slack(f)) << n;
      }
    }
  }
  // Exact variance still matches simulation on the singular sets: aderf on 5 x 5 pairs,
  // 25 entries x 2 checks = 50 checks at 4.5 se: false-failure rate <= 3.4e-4.
  const auto e = make_estimator("aderf", X, Y);
  const MonteCarloResult r = simulate(*e, Kernel::softmax(), X, Y, {20000, 1, 303, Sampler::Iid});
  test::expect_moments(*e, Kernel::softmax(), X, Y, r);
}

TEST(Derf, SaderfConstantCoordinates) {
  // A coordinate that is zero in both sets is irrelevant (Psi_ll = 1); zero in one set only makes
  // Psi_ll 0 or infinite: an error with ridge 0, finite with the default ridge.
  arma::mat X = test::points(4, 10, 0.5, 51), Y = test::points(4, 10, 0.5, 52);
  X.row(1).zeros();
  Y.row(1).zeros();
  const SaderfFit f = fit_saderf(derf_stats(X, Y), {0.0});
  EXPECT_EQ(f.psi(1), 1.0);
  X.row(2).zeros();
  EXPECT_THROW(fit_saderf(derf_stats(X, Y), {0.0}), InvalidArgument);
  const auto e = make_estimator("saderf", X, Y);
  EXPECT_TRUE(e->log_var_over_k2(X, Y).is_finite());
}

TEST(Derf, ParamsJsonRecordsTheFit) {
  const SetPair sp = draw_regime({.name = "heterogen", .dim = 8, .points = 32, .sigma = 0.5, .seed = 1});
  const auto a = make_estimator("aderf", sp.X, sp.Y);
  const auto s = make_estimator("sderf", sp.X, sp.Y);
  const auto sa = make_estimator("saderf", sp.X, sp.Y);
  EXPECT_EQ(a->params()["family"], "aderf");
  EXPECT_TRUE(a->params().contains("A") && a->params().contains("sigma_mean") && a->params().contains("ridge"));
  EXPECT_EQ(s->params()["A_diag"].size(), 8u);
  EXPECT_EQ(sa->params()["psi"].size(), 8u);
  EXPECT_TRUE(DerfEstimator("derf", random_derf(3, 2)).params().contains("A_eigenvalues"));
}

TEST(Derf, BadInput) {
  const arma::mat X = test::points(3, 4, 0.5, 61);
  for (const char* n : {"aderf", "sderf", "saderf"}) {
    EXPECT_THROW(make_estimator(n, arma::mat(3, 0), X), InvalidArgument) << n;
    EXPECT_THROW(make_estimator(n, X, arma::mat(3, 0)), InvalidArgument) << n;
    EXPECT_THROW(make_estimator(n, arma::mat(0, 4), arma::mat(0, 4)), InvalidArgument) << n;
    EXPECT_THROW(make_estimator(n, X, test::points(2, 4, 0.5, 62)), InvalidArgument) << n;
    arma::mat bad = X;
    bad(1, 2) = arma::datum::nan;
    EXPECT_THROW(make_estimator(n, bad, X), InvalidArgument) << n;
    bad(1, 2) = arma::datum::inf;
    EXPECT_THROW(make_estimator(n, X, bad), InvalidArgument) << n;
    const auto e = make_estimator(n, X, X);
    EXPECT_THROW(e->log_var_over_k2(test::points(4, 2, 1, 1), test::points(4, 2, 1, 2)), InvalidArgument) << n;
    Rng rng(1);
    EXPECT_THROW(e->draw(0, rng, Sampler::Iid), InvalidArgument) << n;
    EXPECT_THROW(shifted_log_variance_objective(*e, X, X, 0), InvalidArgument) << n;
  }
  // L < d for ADERF: regularised by default, an error naming M1 with ridge 0 (derf.hpp).
  const arma::mat few = test::points(5, 3, 0.5, 63);
  EXPECT_NO_THROW(make_estimator("aderf", few, few));
  EXPECT_THROW(fit_aderf(derf_stats(few, few), {0.0}), InvalidArgument);
  EXPECT_THROW(fit_aderf(derf_stats(X, X), {-1.0}), InvalidArgument);
  EXPECT_THROW(fit_aderf(derf_stats(X, X), {arma::datum::nan}), InvalidArgument);
  EXPECT_THROW(fit_saderf(derf_stats(X, X), {-1.0}), InvalidArgument);
  EXPECT_THROW(lemma_a1_minimiser(-0.1), InvalidArgument);
  EXPECT_THROW(derf_stats(arma::mat(3, 0), X), InvalidArgument);

  // Invalid DERF parameters (Thm 4.1), each condition in turn.
  const DerfParams good = random_derf(3, 3);
  EXPECT_NO_THROW(validate(good));
  auto broken = [&](auto mutate) {
    DerfParams p = good;
    mutate(p);
    return p;
  };
  EXPECT_THROW(validate(broken([](DerfParams& p) { p.A = 0.125 * arma::eye(3, 3); })), InvalidArgument);  // 8A = I
  EXPECT_THROW(validate(broken([](DerfParams& p) { p.A(0, 1) += 0.01; })), InvalidArgument);   // not symmetric
  EXPECT_THROW(validate(broken([](DerfParams& p) { p.B2 *= 1.0001; })), InvalidArgument);      // B1^T P B2 != I
  EXPECT_THROW(validate(broken([](DerfParams& p) { p.C1(0, 0) += 1e-4; })), InvalidArgument);  // C1 wrong
  EXPECT_THROW(validate(broken([](DerfParams& p) { p.C2(2, 2) -= 1e-4; })), InvalidArgument);  // C2 wrong
  EXPECT_THROW(validate(broken([](DerfParams& p) { p.log_D += 1e-4; })), InvalidArgument);     // D wrong
  EXPECT_THROW(validate(broken([](DerfParams& p) { p.B1(1, 1) = arma::datum::nan; })), InvalidArgument);
  EXPECT_THROW(validate(broken([](DerfParams& p) { p.C1 = arma::eye(2, 2); })), InvalidArgument);  // size
  EXPECT_THROW(validate(DerfParams{}), InvalidArgument);                                           // d = 0
  EXPECT_THROW(validate(good, 0.0), InvalidArgument);
  EXPECT_THROW(DerfEstimator("x", broken([](DerfParams& p) { p.B2 *= 2; })), InvalidArgument);
  EXPECT_THROW(derf_from_a_b1(arma::eye(3, 3), arma::eye(3, 3)), InvalidArgument);      // 8A >= I
  EXPECT_THROW(derf_from_a_b1(arma::zeros(3, 3), arma::zeros(3, 3)), InvalidArgument);  // B1 singular
  EXPECT_THROW(derf_objective(good, derf_stats(test::points(4, 3, 1, 1), test::points(4, 3, 1, 2))), InvalidArgument);
  EXPECT_THROW(gerf_shifted_objective({cplx(0.01, 0.02), 1}, homogeneity_stats(X, X)), InvalidArgument);
}

TEST(Derf, StressNormalRegimeD64Sigma1AllLogVariancesFinite) {
  const SetPair sp = draw_regime({.name = "normal", .dim = 64, .points = 256, .sigma = 1.0, .seed = 7});
  for (const char* name : {"aderf", "sderf", "saderf"}) {
    const auto e = make_estimator(name, sp.X, sp.Y);
    const arma::mat lv = log_variance(*e, Kernel::softmax(), sp.X, sp.Y);
    EXPECT_TRUE(lv.is_finite()) << name;
    EXPECT_TRUE(log_variance(*e, Kernel::gaussian(), sp.X, sp.Y).is_finite()) << name;
    EXPECT_TRUE(std::isfinite(shifted_log_variance_objective(*e, sp.X, sp.Y))) << name;
  }
}
