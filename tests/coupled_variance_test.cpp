// Exact variance with orthogonal and simplex projection blocks (lib/analysis/coupled_variance.hpp): against a 30-50
// digit mpmath reference (scripts/coupled_reference.py --cpp), against kestrel's Monte Carlo simulator at d = 2, 8, 64
// for PosRF, OPRF, TrigRF and a complex GERF, with a negative control; the simplex sampler's law, and agreement with
// the NumPy prototype python/examples/simplex_prf.py. Monte Carlo threshold: 4.5 standard errors (test_util.hpp,
// P(|Z| > 4.5) = 6.8e-6 per check); each test states its number of checks; fixed seeds, printed on failure.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <gsl/gsl_cdf.h>

#include "analysis/coupled_variance.hpp"
#include "analysis/montecarlo.hpp"
#include "core/error.hpp"
#include "estimators/gerf/gerf.hpp"
#include "estimators/registry.hpp"
#include "kestrel_paths.hpp"
#include "sanitized.hpp"
#include "test_util.hpp"

using namespace kestrel;
using cplx = std::complex<double>;

namespace {

// scripts/coupled_reference.py --cpp: {d, c, sign of kappa2, S, sign of Cov, log|Cov/K^2|}, mpmath at 30 + 2 |log10 S|
// digits (the -1/7 etc. are the doubles the samplers use, converted exactly).
struct CovRef {
  arma::uword d;
  double c;
  int kappa_sign;
  double S;
  int sign;
  double log_abs;
};
const CovRef kCovRefs[] = {
    {2, 0.0, 1, 1.0, -1, -2.4056813913603711796},
    {2, -1.0, 1, 1.0, -1, -0.61974285270616058519},
    {2, -1.0, -1, 1.0, 1, -1.7245367411732956953},
    {3, 0.0, -1, 2.5, -1, 0.25537326815554028947},
    {8, -0.14285714285714285, 1, 1e-12, -1, -29.639271422874767126},
    {8, -0.14285714285714285, -1, 1e-06, -1, -30.805001454222193047},
    {8, 0.0, 1, 1e-12, -1, -58.257774505411255461},
    {8, 0.0, -1, 1e-06, -1, -30.62675322281587853},
    {8, -0.14285714285714285, 1, 30.0, -1, -7.172558110422647873e-6},
    {8, -0.14285714285714285, -1, 30.0, -1, 15.484154236682602601},
    {64, 0.0, 1, 0.7, -1, -5.6182102780360878569},
    {64, -0.015873015873015872, 1, 0.7, -1, -4.2374437752188605089},
    {64, -0.015873015873015872, -1, 0.7, -1, -5.5933193020571962961},
    {64, -0.015873015873015872, 1, 200.0, -1, 0.0},
    {5, -0.25, -1, 300.0, -1, 276.14385993505055694},
    {3, 0.0, -1, 300.0, 1, 284.03839213755958326},
    {256, -0.00392156862745098, 1, 3.0, -1, -3.5664937020160105696},
    {64, 0.0, -1, 100.0, -1, 29.224104445994360191},  // even d, large S: the Laguerre recurrence
    {8, -0.14285714285714285, -1, 300.0, 1, 182.54948126413225395},
};

// {family, d, M, sampler, S, log(Var/K^2)}; OPRF's A from rho*(S, d), as fit_oprf gives for a single pair.
struct VarRef {
  const char* family;
  arma::uword d, M;
  const char* sampler;
  double S, log_var;
};
const VarRef kVarRefs[] = {
    {"oprf", 64, 64, "simplex", 1e-10, -32.040708504234103771},
    {"pos", 8, 20, "simplex", 0.5, -4.6260661695111133795},
    {"trig", 8, 20, "orthogonal", 0.5, -6.1306623350889797308},
    {"trig", 2, 2, "simplex", 1e-05, -24.189001073071498382},
    {"pos", 64, 64, "orthogonal", 144.0, 139.84111691664031696},
    {"trig", 5, 5, "simplex", 289.0, 286.69741490658299199},
    {"oprf", 8, 8, "orthogonal", 1e-12, -29.710462657608484704},
    {"trig", 64, 100, "simplex", 0.0001, -25.274379788393265045},
};

GerfParams params_of(const std::string& family, double S, arma::uword d) {
  if (family == "trig") return {cplx(0, 0), -1};
  if (family == "pos") return {cplx(0, 0), 1};
  return {cplx((1 - 1 / oprf_rho_star(S, d)) / 8, 0), 1};
}

// One pair with |x + s y|^2 = S exactly representable: x = a e_1, y = s a e_1 (2a = sqrt S).
std::pair<arma::mat, arma::mat> axis_pair(arma::uword d, double half_norm, int s) {
  arma::mat X(d, 1, arma::fill::zeros), Y(d, 1, arma::fill::zeros);
  X(0, 0) = half_norm;
  Y(0, 0) = s * half_norm;
  return {X, Y};
}

}  // namespace

TEST(CoupledVariance, CovarianceMatchesHighPrecisionReference) {
  // Relative accuracy of Cov/K^2 (log difference), including S = 1e-12 (Cov ~ 1e-13 and ~ 1e-25, cancellation-free),
  // log|Cov| ~ 280 (TrigRF, S = 300) and Cov = -1 + O(e^-100) (PosRF, S = 200). Measured worst: printed (4e-14; over
  // a grid of d = 2..256, S = 1e-12..700, both couplings and both signs of kappa2: 6e-13).
  double worst = 0;
  for (const auto& r : kCovRefs) {
    const SignedLog got = coupled_cov_over_k2({1, static_cast<double>(r.kappa_sign)}, r.d, r.S, r.c);
    EXPECT_EQ(got.sign, r.sign) << "d=" << r.d << " c=" << r.c << " S=" << r.S;
    EXPECT_NEAR(got.log_abs, r.log_abs, 1e-10)
        << "d=" << r.d << " c=" << r.c << " kappa2 sign " << r.kappa_sign << " S=" << r.S;
    worst = std::max(worst, std::abs(got.log_abs - r.log_abs));
  }
  std::printf("[ coupled ] worst |log Cov - reference| = %.2e\n", worst);
}

TEST(CoupledVariance, VarianceMatchesHighPrecisionReference) {
  // log(Var/K^2) of M-feature estimators from the family's single-feature variance and eq. (1): relative 1e-10 or
  // better, from Var/K^2 ~ 1e-14 (simplex OPRF, where M V1 and P Cov cancel by a factor ~2d) to log Var/K^2 ~ 287.
  double worst = 0;
  for (const auto& r : kVarRefs) {
    const GerfParams p = params_of(r.family, r.S, r.d);
    const double lv1 = gerf_log_var_over_k2(p, r.d, r.S);
    const double got = coupled_log_var_over_k2(gerf_isotropic_form(p), r.d, r.S, lv1, r.M, parse_sampler(r.sampler));
    EXPECT_NEAR(got, r.log_var, 1e-10) << r.family << " d=" << r.d << " M=" << r.M << " " << r.sampler << " S=" << r.S;
    worst = std::max(worst, std::abs(got - r.log_var));
  }
  std::printf("[ coupled ] worst |log Var - reference| = %.2e\n", worst);
}

TEST(CoupledVariance, LogVarianceAbove100ThroughTheRegistry) {
  // Where Monte Carlo cannot go (log Var/K^2 ~ 140 and 287): the estimator route (registry isotropic form, the
  // family's log_var_over_k2, log K) equals the reference plus 2 log K, K = exp(x^T y).
  {
    const auto [X, Y] = axis_pair(64, 6.0, 1);  // |x + y|^2 = 144
    const auto e = make_estimator("pos", X, Y);
    const double got = coupled_log_variance(*e, Kernel::softmax(), X, Y, 64, Sampler::Orthogonal)(0, 0);
    EXPECT_NEAR(got, 139.84111691664031696 + 2 * 36.0, 1e-10);
    EXPECT_GT(got - 72.0, 100.0);
  }
  {
    const auto [X, Y] = axis_pair(5, 8.5, -1);  // |x - y|^2 = 289, x^T y = -72.25
    const auto e = make_estimator("trig", X, Y);
    const double got = coupled_log_variance(*e, Kernel::softmax(), X, Y, 5, Sampler::Simplex)(0, 0);
    EXPECT_NEAR(got, 286.69741490658299199 - 2 * 72.25, 1e-10);
  }
}

TEST(CoupledVariance, MatchesMonteCarloAtD2D8D64) {
  // kestrel's simulator (full Haar / simplex blocks, complex features as [Re, Im] columns) against the exact variance
  // for 4 estimators (PosRF, OPRF, TrigRF, GERF with A = 0.02 + 0.03i, s = -1) x 2 samplers x 3 (d, M) cases x 4
  // entries x 2 checks (mean, variance) = 192 checks at 4.5 se: false-failure rate <= 1.3e-3 (union bound). Points
  // have iid N(0, scale^2) entries with 2 d scale^2 = 1, so |x +- y|^2 ~ 1 (moderate tails: the fourth-moment SE is
  // reliable); the d = 8 case has M = 12 (a full block and a partial one) and the Gaussian kernel (its scaling
  // passes through). Under the sanitizers a quarter of the draws (tests/sanitized.hpp: same rate, half the power).
  struct Case {
    arma::uword d, M;
    std::size_t reps;
    double scale;
    Kernel kernel;
  };
  const Case cases[] = {{2, 2, 40000, 0.5, Kernel::softmax()},
                        {8, 12, 20000, 0.25, Kernel::gaussian()},
                        {64, 64, 6000, 0.09, Kernel::softmax()}};
  std::uint64_t seed = 500;
  for (const auto& c : cases) {
    const arma::mat X = test::points(c.d, 2, c.scale, 40 + c.d), Y = test::points(c.d, 2, c.scale, 50 + c.d);
    std::vector<std::unique_ptr<Estimator>> es;
    for (const char* n : {"pos", "oprf", "trig"}) es.push_back(make_estimator(n, X, Y));
    es.push_back(std::make_unique<GerfEstimator>("gerf", c.d, GerfParams{cplx(0.02, 0.03), -1}));
    for (const auto& e : es)
      for (Sampler s : {Sampler::Orthogonal, Sampler::Simplex}) {
        ++seed;
        const MonteCarloResult r = simulate(*e, c.kernel, X, Y, {test::sanitized_draws(c.reps), c.M, seed, s});
        const arma::mat exact = arma::exp(coupled_log_variance(*e, c.kernel, X, Y, c.M, s));
        const auto& m = r.kernel;
        const arma::mat z = (m.variance - exact) / m.se_variance;
        const arma::mat ratio =
            coupled_log_variance(*e, c.kernel, X, Y, c.M, s) - log_variance(*e, c.kernel, X, Y, c.M);
        std::printf(
            "[ coupled MC ] %-4s %-10s d=%2u M=%2u R=%5zu: z(var) = %+.2f %+.2f %+.2f %+.2f; log(Var/Var_iid) = %+.3f "
            "%+.3f %+.3f %+.3f\n",
            e->info().name.c_str(), to_string(s).c_str(), static_cast<unsigned>(c.d), static_cast<unsigned>(c.M),
            test::sanitized_draws(c.reps), z(0), z(1), z(2), z(3), ratio(0), ratio(1), ratio(2), ratio(3));
        for (arma::uword i = 0; i < exact.n_elem; ++i) {
          const std::string tag =
              fmt::format("{} {} d={} M={} seed={} entry {}", e->info().name, to_string(s), c.d, c.M, seed, i);
          EXPECT_LT(std::abs(m.mean(i) - m.exact(i)), test::kSigmas * m.se_mean(i)) << tag;
          EXPECT_LT(std::abs(m.variance(i) - exact(i)), test::kSigmas * m.se_variance(i))
              << tag << ": MC var " << m.variance(i) << " vs exact " << exact(i) << " (se " << m.se_variance(i) << ")";
        }
      }
  }
}

TEST(CoupledVariance, NegativeControlIidFormulaRejectedOnOrthogonalDraws) {
  // TrigRF at d = M = 8 with |x - y| ~ 1: Var_ort / Var_iid ~ e^-1.4, so the iid formula must be rejected on every
  // entry (measured z ~ -100), while the orthogonal formula passes (4 checks at 4.5 se: false-failure rate <= 3e-5).
  // Likewise the orthogonal formula must be rejected against simplex draws for PosRF (Var_simplex/Var_ort ~ e^-0.8).
  const arma::uword d = 8;
  const arma::mat X = test::points(d, 2, 0.25, 61), Y = test::points(d, 2, 0.25, 62);
  const auto trig = make_estimator("trig", X, Y);
  const MonteCarloResult r = simulate(*trig, Kernel::softmax(), X, Y, {20000, d, 601, Sampler::Orthogonal});
  const arma::mat iid = arma::exp(log_variance(*trig, Kernel::softmax(), X, Y, d));
  const arma::mat ort = arma::exp(coupled_log_variance(*trig, Kernel::softmax(), X, Y, d, Sampler::Orthogonal));
  const arma::mat z_iid = (r.kernel.variance - iid) / r.kernel.se_variance;
  const arma::mat z_ort = (r.kernel.variance - ort) / r.kernel.se_variance;
  for (arma::uword i = 0; i < z_iid.n_elem; ++i)
    std::printf("[ coupled ] TrigRF orthogonal draws, entry %u: z = %+.1f vs the iid formula, %+.2f vs orthogonal\n",
                static_cast<unsigned>(i), z_iid(i), z_ort(i));
  EXPECT_EQ(arma::accu(arma::abs(z_iid) > test::kSigmas), z_iid.n_elem) << "the iid formula was not rejected";
  EXPECT_EQ(arma::accu(arma::abs(z_ort) < test::kSigmas), z_ort.n_elem);

  const auto pos = make_estimator("pos", X, Y);
  const MonteCarloResult rs = simulate(*pos, Kernel::softmax(), X, Y, {20000, d, 602, Sampler::Simplex});
  const arma::mat wrong = arma::exp(coupled_log_variance(*pos, Kernel::softmax(), X, Y, d, Sampler::Orthogonal));
  const arma::mat z = (rs.kernel.variance - wrong) / rs.kernel.se_variance;
  EXPECT_EQ(arma::accu(arma::abs(z) > test::kSigmas), z.n_elem) << "orthogonal formula not rejected: z = " << z.t();
}

TEST(CoupledVariance, OrderingsForPositiveFeaturesAndIidLimit) {
  // Exact consequences (coupled_variance.hpp): for kappa2 > 0, Cov_simplex <= Cov_0 <= 0 (simplex <= orthogonal <=
  // iid: CRT Thm 4.1 and Reid et al.), for every d and S tried; TrigRF's simplex covariance is even in c. The iid
  // sampler returns log_variance unchanged, and d = 1 or M = 1 (no pairs in a block) gives the iid value.
  for (arma::uword d : {2u, 3u, 5u, 8u, 64u, 200u})
    for (double S : {1e-9, 0.01, 0.5, 2.0, 10.0, 80.0}) {
      const double c0 = coupled_cov_over_k2({1, 1.0}, d, S, 0.0).value();
      const double cs = coupled_cov_over_k2({1, 1.0}, d, S, block_cosine(Sampler::Simplex, d)).value();
      EXPECT_LE(c0, 0.0) << "d=" << d << " S=" << S;
      EXPECT_LE(cs, c0) << "d=" << d << " S=" << S;
      const double t_minus = coupled_cov_over_k2({-1, -1.0}, d, S, -0.3).value();
      const double t_plus = coupled_cov_over_k2({-1, -1.0}, d, S, 0.3).value();
      EXPECT_NEAR(t_minus, t_plus, 1e-12 * std::max(1.0, std::abs(t_plus))) << "d=" << d << " S=" << S;
    }
  const arma::mat X = test::points(4, 3, 0.4, 71), Y = test::points(4, 2, 0.4, 72);
  for (const char* n : {"pos", "oprf", "trig", "gerf"}) {
    const auto e = make_estimator(n, X, Y);
    const arma::mat iid = log_variance(*e, Kernel::gaussian(), X, Y, 6);
    EXPECT_TRUE(
        arma::approx_equal(coupled_log_variance(*e, Kernel::gaussian(), X, Y, 6, Sampler::Iid), iid, "absdiff", 0.0))
        << n;
    EXPECT_TRUE(arma::approx_equal(coupled_log_variance(*e, Kernel::gaussian(), X, Y, 1, Sampler::Simplex),
                                   log_variance(*e, Kernel::gaussian(), X, Y, 1), "absdiff", 1e-14))
        << n;
  }
}

TEST(CoupledVariance, SimplexSamplerLaw) {
  // Within every block the directions have cosine exactly -1/(d-1) (to rounding) and the partial last block keeps
  // its first columns; every column is N(0, I): KS of the squared norms against chi^2_d and of one coordinate of the
  // first and of the last column against N(0, 1), over 4000 independent draws of d = 5, M = 12 (DKW bound
  // P(sqrt(n) D_n > 2.5) <= 7.5e-6 per KS check, 3 checks: false-failure rate <= 2.3e-5).
  const arma::uword d = 5, M = 12;
  std::vector<double> norms, first, last;
  for (int r = 0; r < 4000; ++r) {
    Rng rng(81, Stream::User, r);
    const arma::mat W = draw_gaussian_omegas(d, M, Sampler::Simplex, rng);
    for (arma::uword start = 0; start < M; start += d) {
      const arma::mat U = arma::normalise(W.cols(start, std::min(M, start + d) - 1));
      arma::mat want(U.n_cols, U.n_cols);
      want.fill(-1.0 / (d - 1));
      want.diag().ones();
      ASSERT_LT(arma::abs(U.t() * U - want).max(), 1e-12) << "rep " << r << " block at " << start;
    }
    for (arma::uword m = 0; m < M; ++m) norms.push_back(gsl_cdf_chisq_P(arma::dot(W.col(m), W.col(m)), d));
    first.push_back(gsl_cdf_ugaussian_P(W(2, 0)));
    last.push_back(gsl_cdf_ugaussian_P(W(1, M - 1)));
  }
  EXPECT_LT(test::ks_uniform(norms), test::kDkw) << "norms are not chi(d)";
  EXPECT_LT(test::ks_uniform(first), test::kDkw) << "column 0 is not N(0, I)";
  EXPECT_LT(test::ks_uniform(last), test::kDkw) << "the partial block's column is not N(0, I)";
}

TEST(CoupledVariance, PythonPrototypeHasTheSameExactVariance) {
  // python/examples/simplex_prf.py's construction (imported by scripts/coupled_reference.py --prototype with a stub
  // `kestrel` module): its blocks have the simplex Gram, and its Monte Carlo variance for PosRF at d = 8, M = 12,
  // S = 0.7 matches the exact simplex variance (2 checks at 4.5 se inside the script: false-failure rate <= 1.4e-5).
  // The exact value the script prints must equal this library's (1e-10): the prototype and Sampler::Simplex then
  // have the same variance, and MatchesMonteCarloAtD2D8D64 ties the library value to kestrel's own draws.
  // Skipped when /usr/bin/python3 has no NumPy/mpmath.
  if (std::system("/usr/bin/python3 -c 'import numpy, mpmath' > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 with numpy and mpmath not available";
  const std::string cmd =
      std::string("/usr/bin/python3 ") + KESTREL_SOURCE_DIR + "/scripts/coupled_reference.py --prototype --quick";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, pipe)) out += buf;
  const int status = pclose(pipe);
  ASSERT_EQ(status, 0) << out;
  const std::string key = "exact log(Var/K^2) PosRF simplex d=8 M=12 S=0.7: ";
  const auto pos = out.find(key);
  ASSERT_NE(pos, std::string::npos) << out;
  const double script_value = std::stod(out.substr(pos + key.size()));
  const GerfParams p{cplx(0, 0), 1};
  const double ours =
      coupled_log_var_over_k2(gerf_isotropic_form(p), 8, 0.7, gerf_log_var_over_k2(p, 8, 0.7), 12, Sampler::Simplex);
  EXPECT_NEAR(ours, script_value, 1e-10) << out;
}

TEST(CoupledVariance, BadInput) {
  const IsotropicForm f{1, 1.0};
  EXPECT_THROW(coupled_cov_over_k2(f, 1, 1.0, 0.0), InvalidArgument);
  EXPECT_THROW(coupled_cov_over_k2(f, 4, -1.0, 0.0), InvalidArgument);
  EXPECT_THROW(coupled_cov_over_k2(f, 4, std::nan(""), 0.0), InvalidArgument);
  EXPECT_THROW(coupled_cov_over_k2(f, 4, kInf, 0.0), InvalidArgument);
  EXPECT_THROW(coupled_cov_over_k2(f, 4, 1.0, 1.5), InvalidArgument);
  EXPECT_THROW(coupled_cov_over_k2({0, 1.0}, 4, 1.0, 0.0), InvalidArgument);
  EXPECT_THROW(coupled_cov_over_k2({1, std::nan("")}, 4, 1.0, 0.0), InvalidArgument);
  EXPECT_THROW(block_cosine(Sampler::Structured, 4), InvalidArgument);
  EXPECT_THROW(block_cosine(Sampler::Iid, 4), InvalidArgument);
  EXPECT_THROW(block_cosine(Sampler::Simplex, 1), InvalidArgument);
  EXPECT_THROW(coupled_log_var_over_k2(f, 4, 1.0, 0.0, 0, Sampler::Orthogonal), InvalidArgument);
  EXPECT_THROW(coupled_log_var_over_k2(f, 4, 1.0, std::nan(""), 4, Sampler::Orthogonal), InvalidArgument);
  EXPECT_THROW(coupled_log_var_over_k2(f, 4, 1.0, 0.0, 4, Sampler::Halton), InvalidArgument);
  EXPECT_EQ(coupled_log_var_over_k2(f, 4, 0.0, -kInf, 4, Sampler::Simplex), -kInf);  // S = 0: exact
  EXPECT_EQ(coupled_cov_over_k2({1, 0.0}, 4, 1.0, -0.3).sign, 0);                    // kappa2 = 0: no dependence

  const arma::mat X = test::points(3, 2, 0.3, 1), Y = test::points(3, 2, 0.3, 2);
  const auto pos = make_estimator("pos", X, Y);
  EXPECT_THROW(coupled_log_variance(*pos, Kernel::softmax(), X, Y, 0, Sampler::Simplex), InvalidArgument);
  EXPECT_THROW(coupled_log_variance(*pos, Kernel::softmax(), X, Y, 3, Sampler::Structured), InvalidArgument);
  EXPECT_THROW(coupled_log_variance(*pos, Kernel::softmax(), test::points(4, 2, 0.3, 3), Y, 3, Sampler::Simplex),
               InvalidArgument);
  EXPECT_THROW(coupled_log_variance(*pos, Kernel::softmax(), arma::mat(3, 0), Y, 3, Sampler::Simplex), InvalidArgument);
  const auto dark = make_estimator("dark", X, Y);  // no isotropic form
  try {
    coupled_log_variance(*dark, Kernel::softmax(), X, Y, 3, Sampler::Orthogonal);
    FAIL() << "an estimator without an isotropic form was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("isotropic form"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(coupled_log_variance(*dark, Kernel::softmax(), X, Y, 3, Sampler::Iid));
}
