// Gaussian projection samplers (see omega.hpp).
#include "sampling/omega.hpp"

#include "core/error.hpp"

namespace kestrel {

Sampler parse_sampler(const std::string& name) {
  if (name == "iid") return Sampler::Iid;
  if (name == "orthogonal") return Sampler::Orthogonal;
  throw InvalidArgument(fmt::format("unknown sampler '{}' (expected iid or orthogonal)", name));
}

std::string to_string(Sampler s) { return s == Sampler::Iid ? "iid" : "orthogonal"; }

arma::mat haar_orthogonal(arma::uword d, Rng& rng) {
  arma::mat Q, R;
  if (!arma::qr(Q, R, rng.normal_matrix(d, d))) throw NumericalError("QR of a Gaussian matrix failed");
  for (arma::uword k = 0; k < d; ++k)
    if (R(k, k) < 0) Q.col(k) *= -1.0;
  return Q;
}

arma::mat draw_gaussian_omegas(arma::uword d, arma::uword M, Sampler sampler, Rng& rng) {
  require(d > 0, "dimension d must be > 0, got 0");
  if (sampler == Sampler::Iid) return rng.normal_matrix(d, M);
  arma::mat W(d, M);
  for (arma::uword start = 0; start < M; start += d) {
    const arma::uword n = std::min(d, M - start);
    const arma::mat Q = haar_orthogonal(d, rng);
    for (arma::uword k = 0; k < n; ++k) W.col(start + k) = Q.col(k) * rng.chi(static_cast<unsigned>(d));
  }
  return W;
}

}  // namespace kestrel
