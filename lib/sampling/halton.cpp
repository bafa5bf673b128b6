// Randomised Halton projections (HRF's "Halton-R", Avron et al. 2016): GSL Halton points with a
// Cranley-Patterson random shift, mapped through the inverse normal CDF; see omega.hpp.
#include <memory>
#include <vector>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_qrng.h>

#include "core/error.hpp"
#include "sampling/omega.hpp"

namespace kestrel {

arma::mat draw_halton_omegas(arma::uword d, arma::uword M, Rng& rng) {
  require(d > 0, "dimension d must be > 0, got 0");
  require(M > 0, "number of features M must be > 0, got 0");
  require(d <= kHaltonMaxDim, "halton sampler supports d <= {} (GSL), got {}", kHaltonMaxDim, d);
  // A shift with 53 bits: GSL's MT19937 uniform has 32-bit resolution, too coarse near 0 where
  // Phi^-1 is steep.
  std::vector<double> shift(d);
  for (double& s : shift) s = rng.uniform() + rng.uniform() * 0x1p-32;

  struct Free {
    void operator()(gsl_qrng* q) const { gsl_qrng_free(q); }
  };
  std::unique_ptr<gsl_qrng, Free> q(gsl_qrng_alloc(gsl_qrng_halton, static_cast<unsigned>(d)));
  if (!q) throw NumericalError(fmt::format("could not allocate a Halton generator of dimension {}", d));

  arma::mat W(d, M);
  std::vector<double> h(d);
  for (arma::uword m = 0; m < M; ++m) {
    gsl_qrng_get(q.get(), h.data());  // GSL starts at the point of index 1, never the origin
    for (arma::uword i = 0; i < d; ++i) {
      double u = h[i] + shift[i];
      if (u >= 1.0) u -= 1.0;
      if (u <= 0.0) u = 0x1p-53;  // only if h + v == 1 in double arithmetic
      W(i, m) = gsl_cdf_ugaussian_Pinv(u);
    }
  }
  return W;
}

}  // namespace kestrel
