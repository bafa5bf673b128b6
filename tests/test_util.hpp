// Shared helpers for the tests: small point sets and the Monte Carlo threshold convention.
#pragma once
#include <armadillo>

#include "core/rng.hpp"

namespace kestrel::test {

// k standard errors for Monte Carlo checks. For a normal statistic P(|Z| > 4.5) = 6.8e-6 per check;
// each test states its number of checks, so the union bound gives its false-failure rate.
inline constexpr double kSigmas = 4.5;

// d x L points with iid N(0, scale^2) entries from a fixed stream.
inline arma::mat points(arma::uword d, arma::uword L, double scale, std::uint64_t seed) {
  Rng rng(seed, Stream::User, 0);
  return scale * rng.normal_matrix(d, L);
}

}  // namespace kestrel::test
