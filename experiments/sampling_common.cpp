// Raw Monte Carlo estimates (see sampling_common.hpp).
#include "sampling_common.hpp"

#include "core/parallel.hpp"

namespace kestrel::experiments {

arma::mat pointwise_estimates(const Estimator& e, const Kernel& k, const arma::vec& x, const arma::mat& Y,
                              std::size_t reps, arma::uword M, std::uint64_t seed, Sampler sampler) {
  arma::mat out(reps, Y.n_cols);
  const arma::mat X(x);
  for_each_block((reps + 63) / 64, [&](std::size_t b) {
    for (std::size_t r = b * 64; r < std::min(reps, (b + 1) * 64); ++r) {
      Rng rng(seed, Stream::MonteCarlo, r);
      out.row(r) = approximate_kernel(e, e.draw(M, rng, sampler), X, Y, k);
    }
  });
  return out;
}

}  // namespace kestrel::experiments
