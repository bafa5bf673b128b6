// The list of estimator families by CLI name. Adding a family: one folder under estimators/ and one
// line in registry.cpp.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "estimators/estimator.hpp"

namespace kestrel {

// Fits the family's parameters on the pair of sets (X, Y) (d x L each) and returns the estimator.
using EstimatorFactory = std::function<std::unique_ptr<Estimator>(const arma::mat& X, const arma::mat& Y)>;

// How plots show a family (matplotlib colour and marker names); plot scripts read it from the
// `families` attribute of every reproduction file, so no plot keeps its own table.
struct Style {
  std::string label, color, marker;
};

enum class Kind { Random, Hybrid };  // Hybrid: a combination of base estimators (HRF), not an iid average
std::string to_string(Kind k);

struct Family {
  std::string name;
  std::string description;
  EstimatorFactory make;
  // Some parameter values give complex features (Re(f1 f2), two real columns per omega). Decides --halve-real.
  bool complex_valued = false;
  Style style;
  Kind kind = Kind::Random;
  // For tasks whose queries come later (classification): fits on (Q, T) taking every data-dependent
  // choice from the reference set T only (PoisRF+'s shift). Empty: `make` already does.
  EstimatorFactory make_from_reference;
};

// make_from_reference if the family has one, else make (after validating the sets).
std::unique_ptr<Estimator> make_estimator_from_reference(const std::string& name, const arma::mat& Q,
                                                         const arma::mat& T);

// --halve-real (CRT 9.10.1: a complex feature holds two real numbers) gives 2M features to the families whose
// features are real for every parameter value, and M to the others, whatever the fitted parameters are. A rule by
// fitted parameters would halve GERF exactly where its optimum is real (s = +1, real A: it equals OPRF) and not where
// it is complex, so its curve would jump by log 2 where the optimum moves onto the real axis; per family the number
// of features is constant along sigma and the curve is as continuous as the fitted variance (README, "--halve-real").
bool halved_by_halve_real(const std::string& family);
inline constexpr const char* kHalveRealRule =
    "per family: 2M features for families whose features are real for every parameter value, M for families that "
    "can have complex features (also where their fitted parameters give real ones)";

const std::vector<Family>& estimator_families();
// The registry for output files and `kestrel estimators --json`: name, description, label, color, marker, kind.
nlohmann::json families_json();
const Family& find_family(const std::string& name);  // InvalidArgument listing the known names
std::unique_ptr<Estimator> make_estimator(const std::string& name, const arma::mat& X, const arma::mat& Y);

}  // namespace kestrel
