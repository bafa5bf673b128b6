// Families registered at run time (registry.hpp, register_family; the Python module's kestrel.custom uses it): found
// by name after the built-in ones, refused for taken names, and studied with an empirical variance when they have no
// exact one (variance_study.hpp, kEmpiricalReps). Each test runs in its own process (gtest_discover_tests).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "analysis/variance_study.hpp"
#include "core/error.hpp"
#include "estimators/registry.hpp"

using namespace kestrel;

namespace {

Family pos_without_variance() {
  Family f = find_family("pos");
  f.name = "runtime-pos";
  f.default_study = false;
  f.exact_variance = false;
  return f;
}

}  // namespace

TEST(RuntimeFamilies, FoundByNameAndRefusedWhenTaken) {
  register_family(pos_without_variance());
  EXPECT_EQ(find_family("runtime-pos").name, "runtime-pos");
  EXPECT_FALSE(find_estimator_family("runtime-pos").exact_variance);
  EXPECT_EQ(estimator_families().back().name, "runtime-pos");
  EXPECT_EQ(estimator_names().back(), "runtime-pos");
  EXPECT_THROW(register_family(pos_without_variance()), InvalidArgument);
  Family builtin = pos_without_variance();
  builtin.name = "oprf";
  EXPECT_THROW(register_family(builtin), InvalidArgument);
  builtin.name = "a,b";
  EXPECT_THROW(register_family(builtin), InvalidArgument);
  const Family& old = find_family("runtime-pos");
  Family newer = pos_without_variance();
  newer.description = "newer";
  register_family(newer, true);
  EXPECT_EQ(find_family("runtime-pos").description, "newer");
  EXPECT_EQ(old.name, "runtime-pos");  // the replaced entry stays valid
  const auto all = estimator_families();
  EXPECT_EQ(std::count_if(all.begin(), all.end(), [](const Family& f) { return f.name == "runtime-pos"; }), 1);
}

TEST(RuntimeFamilies, WithoutExactVarianceTheStudyIsEmpirical) {
  register_family(pos_without_variance(), true);  // true: also when the other test ran in this process
  VarianceStudyOptions o;
  o.regime = "normal";
  o.sigmas = {0.5};
  o.dim = 4;
  o.points = o.mc_points = 16;
  o.pairs = 2;
  o.features = 2;
  o.estimators = {"pos", "runtime-pos"};
  const auto results = run_variance_study(o);
  ASSERT_EQ(results.size(), 2u);
  const ResultRow exact = result_row(results[0], o), empirical = result_row(results[1], o);
  EXPECT_EQ(exact.empirical_reps, 0u);
  EXPECT_EQ(empirical.empirical_reps, kEmpiricalReps);
  EXPECT_EQ(empirical.empirical_points, 16u);
  EXPECT_EQ(empirical.n_pairs, exact.n_pairs);
  EXPECT_EQ(to_json(empirical)["variance"], "empirical");
  EXPECT_FALSE(to_json(exact).contains("variance"));
  EXPECT_EQ(row_from_json(to_json(empirical)), empirical);
  // Same pairs, PosRF's sample variance of 1000 draws against its exact variance: with these light tails a log sample
  // variance has a standard error of about sqrt(2 / 1000) = 0.045; 0.25 is a loose bound on the mean over pairs.
  EXPECT_LT(std::abs(empirical.mean_log_var - exact.mean_log_var), 0.25);
}
