// The three-point form of the DERF parametrisation (three_point.hpp, derivation there).
#include "estimators/three_point.hpp"

#include "core/error.hpp"

namespace kestrel {

bool ThreePointTerm::real() const {
  for (const auto c : {a0, cx, cxy, cy, cyy})
    if (c.imag() != 0) return false;
  return true;
}

double ThreePointForm::total_weight() const {
  double s = 0;
  for (const auto& t : terms) s += t.weight;
  return s;
}

ThreePointForm derf_three_point_form(const arma::mat& A, const arma::mat& B1, const arma::mat& B2) {
  arma::vec a;
  arma::mat V;
  if (!arma::eig_sym(a, V, 0.5 * (A + A.t()))) throw NumericalError("three-point form: eigendecomposition of A failed");
  // P R and 4 A P R in A's eigenbasis; log1p keeps c0 exact for tiny A.
  const arma::vec pr = 1.0 / ((1.0 - 8.0 * a) % (1.0 - 4.0 * a));
  const arma::mat PR = V * arma::diagmat(pr) * V.t();
  const arma::mat APR4 = V * arma::diagmat(4.0 * a % pr) * V.t();
  const arma::mat P = V * arma::diagmat(1.0 / (1.0 - 8.0 * a)) * V.t();
  ThreePointTerm t;
  t.a0 = arma::accu(arma::log1p(-4.0 * a) - 0.5 * arma::log1p(-8.0 * a));
  t.Mx = B1.t() * PR * B1;
  t.Mxy = B1.t() * PR * B2;
  t.cy = 0.5;
  t.My = B2.t() * APR4 * B2;
  t.Myy = B2.t() * P * B2;
  return {{t}};
}

}  // namespace kestrel
