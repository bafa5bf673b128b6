// The isotropic form of a Gaussian-projection random feature: what the exact variance of estimators with coupled
// projections (orthogonal, simplex blocks; analysis/coupled_variance.hpp) needs to know about a family.
//
// A family has an isotropic form when its one-feature estimate of K(x, y) is Re g(w), w ~ N(0, I_d), with
//   g(w) / K(x, y) = exp(a0 + a |w|^2 + b w^T z),   z = x + s y,  s = +-1
// (a0 may depend on S = |z|^2; a, b complex with Re(1 - 2a) > 0). Writing w = r u (r ~ chi(d) independent of the
// uniform direction u) and completing the square in r (E_r e^{a r^2 + beta r} = (1-2a)^{-d/2} E_r e^{beta r /
// sqrt(1-2a)}), the mean of a feature given its direction is
//   H(u^T z) = E[Re g(w) | u] / K = e^{-kappa2 S/2} Re E_{r~chi(d)}[exp(sqrt(kappa2) r u^T z)],  kappa2 = b^2/(1-2a),
// where unbiasedness (E_u H = 1, with E_u E_r e^{k r u^T z} = e^{k^2 S/2}) fixed the constant. kappa2 must be real:
// kappa2 > 0 gives an exponential (positive features), kappa2 < 0 a cosine (sqrt(kappa2) = i sqrt(-kappa2)).
// Features whose norms are drawn independently of their directions are independent given the directions, so the
// covariance of two coupled features depends on the family only through H, i.e. through (s, kappa2).
// GERF: g/K = D^2 e^{-sS/2} exp(2A|w|^2 + B w^T z) with B^2 = s(1-4A): kappa2 = s for every A (gerf.hpp).
#pragma once

namespace kestrel {

struct IsotropicForm {
  int s = 1;          // z = x + s y
  double kappa2 = 1;  // b^2 / (1 - 2a), real
};

}  // namespace kestrel
