// Seeded random streams over GSL's MT19937 (see rng.hpp).
#include "core/rng.hpp"

#include <cmath>

#include <gsl/gsl_randist.h>

namespace kestrel {

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

Rng::Rng(std::uint64_t seed) : rng_(gsl_rng_alloc(gsl_rng_mt19937)) {
  // MT19937 takes an unsigned long seed; seed 0 is mapped by GSL to its default, so mix first.
  gsl_rng_set(rng_.get(), static_cast<unsigned long>(mix64(seed) | 1ULL));
}

Rng::Rng(std::uint64_t seed, Stream domain, std::uint64_t index)
    : Rng(mix64(mix64(seed) ^ mix64(static_cast<std::uint64_t>(domain) * 0x100000001B3ULL + index))) {}

double Rng::normal() { return gsl_ran_gaussian_ziggurat(rng_.get(), 1.0); }
double Rng::uniform() { return gsl_rng_uniform(rng_.get()); }
double Rng::uniform_pos() { return gsl_rng_uniform_pos(rng_.get()); }
unsigned Rng::poisson(double mean) { return gsl_ran_poisson(rng_.get(), mean); }
// GSL's geometric starts at 1; shift to start at 0 as CRT section 3.2.2 defines it.
unsigned Rng::geometric0(double p) { return gsl_ran_geometric(rng_.get(), p) - 1; }
double Rng::chi(unsigned dof) { return std::sqrt(gsl_ran_chisq(rng_.get(), dof)); }

arma::mat Rng::normal_matrix(arma::uword rows, arma::uword cols) {
  arma::mat m(rows, cols);
  for (double& v : m) v = normal();
  return m;
}

}  // namespace kestrel
