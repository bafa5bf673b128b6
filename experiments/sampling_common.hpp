// Raw Monte Carlo estimates for pointwise studies: reps x |Y| estimates of K(x, y_j) for one x.
#pragma once
#include "estimators/estimator.hpp"

namespace kestrel::experiments {

// Row r holds the M-feature estimate of K(x, y_j) from draw (seed, MonteCarlo, r); computed in fixed
// chunks, so identical for any thread count.
arma::mat pointwise_estimates(const Estimator& e, const Kernel& k, const arma::vec& x, const arma::mat& Y,
                              std::size_t reps, arma::uword M, std::uint64_t seed, Sampler sampler);

}  // namespace kestrel::experiments
