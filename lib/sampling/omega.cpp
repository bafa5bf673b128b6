// Gaussian projection samplers: dispatch, iid, block-orthogonal (CRT appendix 9.1) and simplex blocks (Reid et al.
// 2023); see omega.hpp.
// The structured (SORF) and Halton samplers live in structured.cpp and halton.cpp.
#include "sampling/omega.hpp"

#include "core/error.hpp"

namespace kestrel {

arma::mat haar_orthogonal(arma::uword d, Rng& rng) {
  require(d > 0, "dimension d must be > 0, got 0");
  arma::mat Q, R;
  if (!arma::qr(Q, R, rng.normal_matrix(d, d))) throw NumericalError("QR of a Gaussian matrix failed");
  for (arma::uword k = 0; k < d; ++k)
    if (R(k, k) < 0) Q.col(k) *= -1.0;
  return Q;
}

arma::mat draw_gaussian_omegas(arma::uword d, arma::uword M, Sampler sampler, Rng& rng) {
  require(d > 0, "dimension d must be > 0, got 0");
  require(M > 0, "number of features M must be > 0, got 0");
  switch (sampler) {
    case Sampler::Iid:
      return rng.normal_matrix(d, M);
    case Sampler::Structured:
      return draw_structured_omegas(d, M, rng);
    case Sampler::Halton:
      return draw_halton_omegas(d, M, rng);
    case Sampler::Orthogonal:
    case Sampler::Simplex:
      break;
  }
  arma::mat W(d, M);
  for (arma::uword start = 0; start < M; start += d) {
    const arma::uword n = std::min(d, M - start);
    arma::mat Q = haar_orthogonal(d, rng);
    if (sampler == Sampler::Simplex && d > 1) {
      // Q s_k with s_k = (e_k - 1/d) / sqrt((d-1)/d): the rotated simplex without forming it.
      const arma::vec mean = arma::mean(Q, 1);
      Q.each_col() -= mean;
      Q *= std::sqrt(static_cast<double>(d) / static_cast<double>(d - 1));
    }
    for (arma::uword k = 0; k < n; ++k) W.col(start + k) = Q.col(k) * rng.chi(static_cast<unsigned>(d));
  }
  return W;
}

}  // namespace kestrel
