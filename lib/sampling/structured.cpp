// Structured orthogonal random features (SORF, Yu et al. 2016; HRF's "ORF-Had"): blocks
// D0 H D1 H D2 H D3 of Walsh-Hadamard and random sign matrices, with chi(d) norms. The exact and
// the missing marginal properties are documented in omega.hpp.
#include <cmath>
#include <numeric>
#include <vector>

#include <gsl/gsl_randist.h>

#include "core/error.hpp"
#include "sampling/omega.hpp"

namespace kestrel {

void fwht(double* v, arma::uword n) {
  for (arma::uword h = 1; h < n; h *= 2)
    for (arma::uword i = 0; i < n; i += 2 * h)
      for (arma::uword j = i; j < i + h; ++j) {
        const double a = v[j], b = v[j + h];
        v[j] = a + b;
        v[j + h] = a - b;
      }
}

namespace {

// One block: d x p unit directions. The products are computed unnormalised (H_p^2 = p I), so every
// entry is an integer of magnitude <= p^2 <= 2^32, exact in double: a zero truncated column is
// detected exactly, and normalising each column afterwards removes the factor p^(3/2).
bool structured_block(arma::uword d, arma::uword p, Rng& rng, arma::mat& U) {
  gsl_rng* r = rng.raw();
  auto signs = [&] {
    std::vector<double> s(p);
    for (double& x : s) x = gsl_rng_uniform_int(r, 2) ? 1.0 : -1.0;
    return s;
  };
  const std::vector<double> D0 = signs(), D1 = signs(), D2 = signs(), D3 = signs();
  std::vector<std::size_t> rows(p);
  std::iota(rows.begin(), rows.end(), std::size_t{0});
  gsl_ran_shuffle(r, rows.data(), p, sizeof(std::size_t));  // first d entries: random ordered subset

  U.set_size(d, p);
  std::vector<double> v(p);
  for (arma::uword m = 0; m < p; ++m) {
    std::fill(v.begin(), v.end(), 0.0);
    v[m] = D3[m];
    fwht(v.data(), p);
    for (arma::uword i = 0; i < p; ++i) v[i] *= D2[i];
    fwht(v.data(), p);
    for (arma::uword i = 0; i < p; ++i) v[i] *= D1[i];
    fwht(v.data(), p);
    double norm2 = 0;
    for (arma::uword i = 0; i < d; ++i) {
      const double x = D0[rows[i]] * v[rows[i]];
      U(i, m) = x;
      norm2 += x * x;
    }
    if (norm2 == 0) return false;
    U.col(m) /= std::sqrt(norm2);
  }
  return true;
}

}  // namespace

arma::mat draw_structured_omegas(arma::uword d, arma::uword M, Rng& rng) {
  require(d > 0, "dimension d must be > 0, got 0");
  require(M > 0, "number of features M must be > 0, got 0");
  require(d <= (arma::uword{1} << 16), "structured sampler supports d <= 65536, got {}", d);
  arma::uword p = 1;
  while (p < d) p *= 2;
  arma::mat W(d, M), U;
  for (arma::uword start = 0; start < M; start += p) {
    // Redrawing a block with a zero truncated column conditions on an event invariant under the
    // coordinate sign changes and permutations, so the exact properties (a)-(c) survive.
    int attempts = 0;
    while (!structured_block(d, p, rng, U))
      if (++attempts == 10000) throw NumericalError(fmt::format("structured sampler: no valid block for d = {}", d));
    const arma::uword n = std::min(p, M - start);
    for (arma::uword k = 0; k < n; ++k) W.col(start + k) = U.col(k) * rng.chi(static_cast<unsigned>(d));
  }
  return W;
}

}  // namespace kestrel
