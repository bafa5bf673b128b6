// A per-row Monte Carlo mean with a control variate, cross-fitted: x is an error per draw, c a quantity of the same
// draw whose mean is known exactly to be 0 (advise: c = D-hat_i / D_i - 1, the normaliser's relative deviation; E D-hat
// = D for every sampler whose features are marginally Gaussian projections). The estimate of E x is
//   sum_h (n_h / n) (mean_h x - beta_{1-h} mean_h c),   beta_h = cov_h(x, c) / var_h(c),
// over the two halves h of the draws (by the parity of the draw's index): each half's coefficient is fitted on the
// other half, so it is independent of the draws it corrects and the estimate is unbiased (an in-sample beta is not, and
// with heavy tails its bias is not small). Its variance is sum_h (n_h / n)^2 var_h(x - beta_{1-h} c) / n_h; a row where
// that is larger than the plain mean's keeps the plain mean (a choice made on the data: a second-order bias, within
// the tests' tolerance). Sums from
// several runs add (operator+=), so more draws can be added to a decision. Checked against plain means of many draws
// (tests/control_variate_test.cpp).
#pragma once
#include <array>
#include <cstddef>

#include <armadillo>

namespace kestrel {

struct ControlVariateSums {
  std::array<double, 2> n{0, 0};  // draws per half
  std::array<arma::vec, 2> x, xx, c, cc, xc;

  // Draw `index` (its parity picks the half) with per-row x and c.
  void add(std::size_t index, const arma::vec& xs, const arma::vec& cs);
  ControlVariateSums& operator+=(const ControlVariateSums& o);
  double draws() const { return n[0] + n[1]; }

  struct Estimate {
    arma::vec mean, se;  // with the control variate (mean clamped at 0: x >= 0)
    arma::vec plain_mean, plain_se;
    arma::vec reduction;  // plain variance / variance with the control variate, per row (1 where undefined)
  };
  // Needs kMinHalf draws in each half for the control variate, else the plain mean is returned for both: with 2 per
  // half each coefficient is fitted on 2 points and each half's variance has one degree of freedom, so its SE can come
  // out near 0 by chance (seen at 4 draws), and a decision would rest on it.
  static constexpr double kMinHalf = 4;
  Estimate estimate() const;
};

}  // namespace kestrel
