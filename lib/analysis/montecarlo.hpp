// Monte Carlo simulator: R independent feature draws of M features each; per entry of the estimated
// kernel matrix K_hat = P S^T (and of K_hat C) the empirical mean and variance with standard errors.
// Rep r draws from stream (seed, MonteCarlo, r); reps are cut into a fixed number of chunks combined
// in order, so results are identical for any thread count.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "estimators/estimator.hpp"

namespace kestrel {

struct MonteCarloOptions {
  std::size_t reps = 1000;   // R
  arma::uword features = 1;  // M per draw
  std::uint64_t seed = 0;
  Sampler sampler = Sampler::Iid;
};

// Empirical moments per entry. Variance is the unbiased sample variance of the M-feature estimate;
// se_variance = sqrt((m4 - v^2 (R-3)/(R-1)) / R), the standard error of a sample variance from the
// fourth central moment m4.
struct EntryMoments {
  arma::mat exact;  // exact value (K or K C)
  arma::mat mean, variance, se_mean, se_variance;
};

struct MonteCarloResult {
  EntryMoments kernel;
  std::optional<EntryMoments> kernel_times;  // present when C was given
  std::size_t reps = 0;
  arma::uword features = 0;
};

MonteCarloResult simulate(const Estimator& e, const Kernel& k, const arma::mat& X, const arma::mat& Y,
                          const MonteCarloOptions& opt, const arma::mat* C = nullptr);

// simulate() for several estimators that draw alike (the same Draw from the same stream, e.g. the GERF family's
// Gaussian projections), on one draw per rep instead of one per estimator: each result is the one simulate() gives,
// bit for bit, at a fraction of the cost when drawing dominates (orthogonal blocks: a QR per block). InvalidArgument
// if rep 0's draws differ between the estimators.
std::vector<MonteCarloResult> simulate_shared(const std::vector<const Estimator*>& es, const Kernel& k,
                                              const arma::mat& X, const arma::mat& Y, const MonteCarloOptions& opt);

}  // namespace kestrel
