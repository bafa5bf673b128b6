// The list of estimator families by CLI name. Adding a family: one folder under estimators/ and one
// line in registry.cpp.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "estimators/estimator.hpp"

namespace kestrel {

// Fits the family's parameters on the pair of sets (X, Y) (d x L each) and returns the estimator.
using EstimatorFactory = std::function<std::unique_ptr<Estimator>(const arma::mat& X, const arma::mat& Y)>;

struct Family {
  std::string name;
  std::string description;
  EstimatorFactory make;
};

const std::vector<Family>& estimator_families();
const Family& find_family(const std::string& name);  // InvalidArgument listing the known names
std::unique_ptr<Estimator> make_estimator(const std::string& name, const arma::mat& X, const arma::mat& Y);

}  // namespace kestrel
