// Sampling regimes for pairs of point sets X, Y (d x L each), CRT section 5.1 / DERF section 5.1:
//   normal:    x, y ~ N(0, sigma^2 I)
//   sphere:    x, y uniform on the sphere sigma S^{d-1}
//   heterogen: x ~ N(0, sigma^2 I), y ~ N(sigma 1, sigma^2 I)
// A regime draws unit-scale sets from stream (seed, Data, pair) and multiplies by sigma, so a sweep
// over sigma uses common random numbers and gives smooth curves.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <armadillo>

namespace kestrel {

struct SetPair {
  arma::mat X, Y;
};

const std::vector<std::string>& regime_names();
void validate_regime(const std::string& name);
SetPair draw_regime(const std::string& name, arma::uword d, arma::uword L, double sigma, std::uint64_t seed,
                    std::uint64_t pair_index);

}  // namespace kestrel
