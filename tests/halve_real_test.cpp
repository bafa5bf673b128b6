// The --halve-real rule (CRT 9.10.1, README "--halve-real"): per family, not per fitted parameters. Families declared
// real-valued in the registry never produce complex features, and GERF keeps M features at every sigma, also where
// its fitted optimum is real (it then equals OPRF, which gets 2M), so its curve has no log 2 jump where s flips.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/variance_study.hpp"
#include "data/regimes.hpp"
#include "estimators/registry.hpp"

using namespace kestrel;

TEST(HalveReal, FamiliesDeclaredRealNeverHaveComplexFeatures) {
  // A family that --halve-real gives 2M features must be real for whatever parameters its fit picks: checked over
  // three regimes and sigmas from the tiny-variance end (0.001) to 0.2 (DARK refuses larger inputs at d = 8).
  int n_complex = 0;
  for (const char* regime : {"normal", "sphere", "heterogen"}) {
    for (double sigma : {0.001, 0.1, 0.2}) {
      const SetPair sp = draw_regime({.name = regime, .dim = 8, .points = 16, .sigma = sigma, .seed = 4});
      for (const auto& f : estimator_families()) {
        if (f.kind == Kind::Learned) continue;  // no variance, not in a variance study
        const auto e = make_estimator(f.name, sp.X, sp.Y);
        EXPECT_EQ(halved_by_halve_real(f.name), !f.complex_valued);
        if (!f.complex_valued) {
          EXPECT_FALSE(e->info().complex) << f.name << " " << regime << " sigma=" << sigma;
        }
        n_complex += e->info().complex;
      }
    }
  }
  EXPECT_GT(n_complex, 0);  // the complex families really are complex somewhere on this grid
}

TEST(HalveReal, GerfKeepsMFeaturesWhereItsOptimumTurnsReal) {
  // Normal regime, d = 64: the fitted GERF is complex (s = -1) at sigma = 0.001 and real (s = +1, = OPRF) at sigma = 1.
  VarianceStudyOptions o;
  o.regime = "normal";
  o.sigmas = {0.001, 1.0};
  o.dim = 64;
  o.points = 32;
  o.pairs = 1;
  o.seed = 5;
  o.estimators = {"gerf", "oprf", "trig", "pos"};
  o.features = 3;
  o.halve_real = true;
  const auto results = run_variance_study(o);
  int n_real = 0, n_complex = 0;
  double gerf_real = 0, oprf_same_sigma = 0;
  for (const auto& r : results) {
    EXPECT_EQ(r.features, r.estimator == "gerf" || r.estimator == "trig" ? 3u : 6u) << r.estimator << " " << r.sigma;
    if (r.estimator != "gerf") continue;
    const auto& p = r.params.at(0);
    const bool real = p.at("s") == 1 && p.at("A_im") == 0.0;
    (real ? n_real : n_complex) += 1;
    if (real) {
      gerf_real = r.summary.log_var.mean;
      for (const auto& q : results)
        if (q.estimator == "oprf" && q.sigma == r.sigma) oprf_same_sigma = q.summary.log_var.mean;
    }
  }
  ASSERT_EQ(n_real, 1) << "the grid must cross the point where the optimum becomes real";
  ASSERT_EQ(n_complex, 1);
  // At the real optimum GERF is OPRF with half the features: log 2 above it. The fitted A agrees with rho* to ~1e-6,
  // and log Var is stationary in A there, so 1e-6 is ample.
  EXPECT_NEAR(gerf_real - oprf_same_sigma, std::log(2.0), 1e-6);
  EXPECT_EQ(study_inputs(o).at("halve_real_rule"), kHalveRealRule);  // the rule is written into every output's inputs
}
