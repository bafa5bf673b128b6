// Synthetic sampling regimes (see regimes.hpp).
#include "data/regimes.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace kestrel {

const std::vector<std::string>& regime_names() {
  static const std::vector<std::string> names = {"normal", "sphere", "heterogen"};
  return names;
}

void validate_regime(const std::string& name) {
  for (const auto& n : regime_names())
    if (n == name) return;
  std::string known;
  for (const auto& n : regime_names()) known += (known.empty() ? "" : ", ") + n;
  throw InvalidArgument(fmt::format("unknown regime '{}' (known: {})", name, known));
}

SetPair draw_regime(const std::string& name, arma::uword d, arma::uword L, double sigma, std::uint64_t seed,
                    std::uint64_t pair_index) {
  validate_regime(name);
  require(d > 0, "dimension d must be > 0, got 0");
  require(L > 0, "number of points L must be > 0, got 0");
  require(std::isfinite(sigma) && sigma > 0, "sigma must be > 0, got {}", sigma);
  Rng rng(seed, Stream::Data, pair_index);
  SetPair p{rng.normal_matrix(d, L), rng.normal_matrix(d, L)};
  if (name == "sphere") {
    p.X.each_row() /= arma::sqrt(arma::sum(arma::square(p.X), 0));
    p.Y.each_row() /= arma::sqrt(arma::sum(arma::square(p.Y), 0));
  } else if (name == "heterogen") {
    p.Y += 1.0;
  }
  p.X *= sigma;
  p.Y *= sigma;
  return p;
}

}  // namespace kestrel
