// Shared helpers for the tests: small point sets and the Monte Carlo threshold convention.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include <armadillo>

#include "analysis/montecarlo.hpp"
#include "core/rng.hpp"
#include "estimators/estimator.hpp"

namespace kestrel::test {

// k standard errors for Monte Carlo checks. For a normal statistic P(|Z| > 4.5) = 6.8e-6 per check;
// each test states its number of checks, so the union bound gives its false-failure rate.
inline constexpr double kSigmas = 4.5;

// Kolmogorov-Smirnov: sqrt(n) D_n of values already mapped through their hypothesised CDF (so U(0,1)), and the
// threshold whose false-failure rate is <= 7.5e-6 per check (DKW: P(sqrt(n) D_n > t) <= 2 e^{-2 t^2}).
inline constexpr double kDkw = 2.5;
inline double ks_uniform(std::vector<double> u) {
  std::sort(u.begin(), u.end());
  const double n = static_cast<double>(u.size());
  double D = 0;
  for (std::size_t i = 0; i < u.size(); ++i)
    D = std::max({D, (static_cast<double>(i) + 1) / n - u[i], u[i] - static_cast<double>(i) / n});
  return D * std::sqrt(n);
}

// d x L points with iid N(0, scale^2) entries from a fixed stream.
inline arma::mat points(arma::uword d, arma::uword L, double scale, std::uint64_t seed) {
  Rng rng(seed, Stream::User, 0);
  return scale * rng.normal_matrix(d, L);
}

// Every entry of a Monte Carlo run against theory: |MC mean - target| < kSigmas SE(mean) and
// |MC variance - exact variance of the M-feature estimate| < kSigmas SE(variance). The mean target is
// the exact kernel unless given; var_scale multiplies the exact variance (negative controls).
inline void expect_moments(const Estimator& e, const Kernel& k, const arma::mat& X, const arma::mat& Y,
                           const MonteCarloResult& r, double var_scale = 1.0, const arma::mat* mean_target = nullptr) {
  const arma::mat exact_var = var_scale * arma::exp(log_variance(e, k, X, Y, r.features));
  const auto& m = r.kernel;
  const arma::mat& target = mean_target ? *mean_target : m.exact;
  for (arma::uword i = 0; i < exact_var.n_elem; ++i) {
    EXPECT_LT(std::abs(m.mean(i) - target(i)), kSigmas * m.se_mean(i))
        << e.info().name << " entry " << i << ": mean " << m.mean(i) << " vs " << target(i);
    EXPECT_LT(std::abs(m.variance(i) - exact_var(i)), kSigmas * m.se_variance(i))
        << e.info().name << " entry " << i << ": MC var " << m.variance(i) << " vs exact " << exact_var(i) << " (se "
        << m.se_variance(i) << ")";
  }
}

}  // namespace kestrel::test
