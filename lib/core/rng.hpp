// Explicit, seeded random streams (GSL's MT19937). A stream is named by (seed, domain, index), so
// parallel work draws from a fixed partition of streams and is identical for any thread count.
#pragma once
#include <cstdint>
#include <memory>
#include <string_view>

#include <gsl/gsl_rng.h>
#include <armadillo>

namespace kestrel {

// Every seed option (--seed, seed=, `seed` in TOML) has this default and range: HDF5 records the seed as a signed
// 64-bit attribute.
constexpr std::uint64_t kDefaultSeed = 1;
constexpr std::uint64_t kMaxSeed = INT64_MAX;

// Stream domains keep e.g. data draws and feature draws of the same seed independent.
enum class Stream : std::uint64_t {
  Data = 1,
  Features = 2,
  MonteCarlo = 3,
  Fit = 4,
  User = 5,
  Values = 6,
  Prediction = 7
};

// SplitMix64 finaliser: a bijective 64-bit mix used to derive stream seeds.
std::uint64_t mix64(std::uint64_t x);

class Rng {
 public:
  explicit Rng(std::uint64_t seed);
  Rng(std::uint64_t seed, Stream domain, std::uint64_t index);

  double normal();                // N(0, 1)
  double uniform();               // U[0, 1)
  double uniform_pos();           // U(0, 1)
  unsigned poisson(double mean);  // Poisson(mean)
  unsigned geometric0(double p);  // P(k) = p (1-p)^k, k = 0, 1, ...
  double chi(unsigned dof);       // sqrt of chi^2_dof
  arma::mat normal_matrix(arma::uword rows, arma::uword cols);

  gsl_rng* raw() { return rng_.get(); }

 private:
  struct Free {
    void operator()(gsl_rng* r) const { gsl_rng_free(r); }
  };
  std::unique_ptr<gsl_rng, Free> rng_;
};

}  // namespace kestrel
