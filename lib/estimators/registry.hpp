// The list of estimator families by CLI name, with everything shared code needs to know about a family (how it is
// fitted, shown, and how a feature budget maps to its draws). Adding a family: one folder under estimators/ and one
// entry in registry.cpp; the contract suite (tests/contract_test.cpp) then covers it.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/enum_names.hpp"
#include "estimators/estimator.hpp"
#include "estimators/isotropic.hpp"
#include "estimators/three_point.hpp"

namespace kestrel {

// Fits the family's parameters on the pair of sets (X, Y) (d x L each) and returns the estimator.
using EstimatorFactory = std::function<std::unique_ptr<Estimator>(const arma::mat& X, const arma::mat& Y)>;
// Rebuilds an estimator of the family from its Estimator::state().
using RestoreFactory = std::function<std::unique_ptr<Estimator>(const nlohmann::json& state)>;
using MapFactory = std::function<std::unique_ptr<FeatureMap>(const arma::mat& X, const arma::mat& Y)>;
// Draws a family takes for a budget of M real feature columns.
using DrawBudget = std::function<arma::uword(arma::uword M)>;

// How plots show a family (matplotlib colour, marker and line style); plot scripts read it from the
// `families` attribute of every reproduction file, so no plot keeps its own table.
struct Style {
  std::string label, color, marker, line = "-";
};

// Random: an average of M iid random features. Hybrid: a combination of base estimators (HRF), not an iid average.
// Learned: a trained deterministic map (LUNA): features only, no variance (a FeatureMap, not an Estimator).
enum class Kind { Random, Hybrid, Learned };
template <>
struct EnumNames<Kind> {
  static constexpr std::string_view what = "kind";
  static constexpr std::array<EnumName<Kind>, 3> names{
      {{Kind::Random, "random"}, {Kind::Hybrid, "hybrid"}, {Kind::Learned, "learned"}}};
};
inline std::string to_string(Kind k) { return name_of(k); }

struct Family {
  std::string name;
  std::string description;
  Kind kind = Kind::Random;
  EstimatorFactory make;   // Random and Hybrid
  RestoreFactory restore;  // Random and Hybrid: from state()
  MapFactory make_map;     // Learned: the map before training (`kestrel reproduce luna` trains them)
  // Some parameter values give complex features (Re(f1 f2), two real columns per omega). Decides --halve-real.
  bool complex_valued = false;
  Style style;
  // For tasks whose queries come later (classification): fits on (Q, T) taking every data-dependent
  // choice from the reference set T only (PoisRF+'s shift). Empty: `make` already does.
  EstimatorFactory make_from_reference = {};
  // A budget of M real feature columns (what one linear-attention product costs): the draws the family takes and,
  // if it uses other settings at a fixed budget, its factory (HRF Fig. 3's FLOP matching for the hybrids).
  // Empty: M draws (M/2 for complex_valued families, two columns per draw) and `make`.
  DrawBudget draws_for_columns = {};
  EstimatorFactory make_for_budget = {};
  bool default_study = false;     // among the estimators `kestrel variance` compares by default
  bool default_features = false;  // the one family that feature maps use by default (kestrel.sklearn.RandomFeatures)
  // False: log_var_over_k2 is not known (an estimator written in Python without it); the variance study then
  // estimates the variance by Monte Carlo (variance_study.hpp, kEmpiricalReps).
  bool exact_variance = true;
  // Which exact-variance forms the family's estimators give (Estimator::three_point_form, isotropic_form: the hooks
  // are overridden in the family's folder; the contract suite checks these flags against them). Shared code asks
  // the flags to choose families without fitting one, and the estimator for the form itself.
  bool has_three_point_form = false;  // estimators/three_point.hpp: the exact variance of K-hat C
  bool has_isotropic_form = false;    // estimators/isotropic.hpp: the exact variance with coupled projections
};

// The built-in families in registry order, then those registered at run time (a snapshot).
std::vector<Family> estimator_families();
// Adds a family at run time (the Python module's estimators written in NumPy, python/bind_custom.cpp). Built-in names
// are refused; an existing runtime name too unless `replace` (the newer entry wins; the older one stays valid for
// references already held). Thread-safe.
void register_family(Family f, bool replace = false);
// The registry for output files and `kestrel estimators --json`: name, description, kind, label, color, marker, line.
nlohmann::json families_json();
const Family& find_family(const std::string& name);  // InvalidArgument listing the known names
// The family of an estimator with a variance: InvalidArgument also for learned maps, saying why.
const Family& find_estimator_family(const std::string& name);
std::vector<std::string> estimator_names();           // every family with a variance, in registry order
std::vector<std::string> default_study_estimators();  // the default of --estimators
std::string default_feature_estimator();              // the family flagged default_features

// The estimator's three-point form if its family has one (Estimator::three_point_form), else nothing.
std::optional<ThreePointForm> three_point_form(const Estimator& e);

// The estimator's isotropic form if its family has one (Estimator::isotropic_form), else nothing.
std::optional<IsotropicForm> isotropic_form(const Estimator& e);

// Each validates the sets first.
std::unique_ptr<Estimator> make_estimator(const std::string& name, const arma::mat& X, const arma::mat& Y);
std::unique_ptr<FeatureMap> make_feature_map(const std::string& name, const arma::mat& X, const arma::mat& Y);
// The estimator whose state() this is (its "family" names the registry entry); InvalidArgument for a malformed state.
std::unique_ptr<Estimator> restore_estimator(const nlohmann::json& state);
// make_from_reference if the family has one, else make.
std::unique_ptr<Estimator> make_estimator_from_reference(const std::string& name, const arma::mat& Q,
                                                         const arma::mat& T);
// The estimator for a fixed budget of real feature columns (make_for_budget or make), and the draws it takes for a
// budget of M columns (at least 1).
std::unique_ptr<Estimator> make_estimator_for_budget(const std::string& name, const arma::mat& X, const arma::mat& Y);
arma::uword draws_for_budget(const std::string& name, arma::uword M);

// --halve-real (CRT 9.10.1: a complex feature holds two real numbers) gives 2M features to the families whose
// features are real for every parameter value, and M to the others, whatever the fitted parameters are. A rule by
// fitted parameters would halve GERF exactly where its optimum is real (s = +1, real A: it equals OPRF) and not where
// it is complex, so its curve would jump by log 2 where the optimum moves onto the real axis; per family the number
// of features is constant along sigma and the curve is as continuous as the fitted variance (README, "--halve-real").
bool halved_by_halve_real(const std::string& family);
inline constexpr const char* kHalveRealRule =
    "per family: 2M features for families whose features are real for every parameter value, M for families that "
    "can have complex features (also where their fitted parameters give real ones)";

}  // namespace kestrel
