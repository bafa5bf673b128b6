// JSON forms of fitted parameters (see state.hpp).
#include "estimators/state.hpp"

#include <cmath>

#include "core/error.hpp"

namespace kestrel::state {

namespace {

const nlohmann::json& field(const nlohmann::json& j, const std::string& key) {
  require(j.is_object() && j.contains(key), "estimator state has no field '{}'", key);
  return j[key];
}

template <typename Mat>
Mat matrix(const nlohmann::json& j, const std::string& key, int parts) {
  const auto& f = field(j, key);
  require(f.is_object() && f.contains("rows") && f.contains("cols") && f.contains("data"),
          "estimator state field '{}' is not a matrix", key);
  const auto rows = f["rows"].get<arma::uword>(), cols = f["cols"].get<arma::uword>();
  const auto& data = f["data"];
  require(data.is_array() && data.size() == rows * cols * parts, "estimator state field '{}' holds {} numbers, not {}",
          key, data.size(), rows * cols * parts);
  Mat m(rows, cols);
  for (arma::uword k = 0; k < m.n_elem; ++k) {
    if constexpr (std::is_same_v<Mat, arma::mat>)
      m(k) = data[k].get<double>();
    else
      m(k) = {data[2 * k].get<double>(), data[2 * k + 1].get<double>()};
  }
  require(m.is_finite(), "estimator state field '{}' is not finite", key);
  return m;
}

}  // namespace

nlohmann::json of(const arma::mat& m) {
  return {{"rows", m.n_rows}, {"cols", m.n_cols}, {"data", std::vector<double>(m.begin(), m.end())}};
}

nlohmann::json of(const arma::cx_mat& m) {
  std::vector<double> data;
  for (const auto& z : m) data.push_back(z.real()), data.push_back(z.imag());
  return {{"rows", m.n_rows}, {"cols", m.n_cols}, {"data", data}};
}

nlohmann::json of(std::complex<double> z) { return {z.real(), z.imag()}; }

arma::mat mat(const nlohmann::json& j, const std::string& key) { return matrix<arma::mat>(j, key, 1); }
arma::cx_mat cx_mat(const nlohmann::json& j, const std::string& key) { return matrix<arma::cx_mat>(j, key, 2); }

std::complex<double> cx(const nlohmann::json& j, const std::string& key) {
  const auto& f = field(j, key);
  require(f.is_array() && f.size() == 2, "estimator state field '{}' is not a complex number [re, im]", key);
  const std::complex<double> z(f[0].get<double>(), f[1].get<double>());
  require(std::isfinite(z.real()) && std::isfinite(z.imag()), "estimator state field '{}' is not finite", key);
  return z;
}

double num(const nlohmann::json& j, const std::string& key) {
  const auto& f = field(j, key);
  require(f.is_number(), "estimator state field '{}' is not a number", key);
  const double v = f.get<double>();
  require(std::isfinite(v), "estimator state field '{}' is not finite", key);
  return v;
}

arma::uword count(const nlohmann::json& j, const std::string& key) {
  const auto& f = field(j, key);
  require(f.is_number_unsigned(), "estimator state field '{}' is not a count", key);
  return f.get<arma::uword>();
}

}  // namespace kestrel::state
