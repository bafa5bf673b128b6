// Exact JSON forms of fitted parameters for Estimator::state() and the registry's restore (pickling in Python):
// matrices as {"rows", "cols", "data" (column-major)}, complex numbers as [re, im]. JSON numbers keep 17
// significant digits, so a double survives the round trip bit for bit; a malformed state is an InvalidArgument.
#pragma once
#include <complex>
#include <string>

#include <armadillo>
#include <nlohmann/json.hpp>

namespace kestrel::state {

nlohmann::json of(const arma::mat& m);
nlohmann::json of(const arma::cx_mat& m);
nlohmann::json of(std::complex<double> z);

// The field `key` of a state: a matrix, a complex matrix, a complex number, or a finite number.
arma::mat mat(const nlohmann::json& j, const std::string& key);
arma::cx_mat cx_mat(const nlohmann::json& j, const std::string& key);
std::complex<double> cx(const nlohmann::json& j, const std::string& key);
double num(const nlohmann::json& j, const std::string& key);
arma::uword count(const nlohmann::json& j, const std::string& key);

}  // namespace kestrel::state
