// Samplers for Gaussian projections omega (columns of a d x M matrix, each marginally N(0, I_d)):
// iid, and block-orthogonal (CRT appendix 9.1) with Haar-distributed blocks and chi(d) row norms.
#pragma once
#include <string>

#include <armadillo>

#include "core/rng.hpp"

namespace kestrel {

enum class Sampler { Iid, Orthogonal };

Sampler parse_sampler(const std::string& name);
std::string to_string(Sampler s);

// d x M matrix of projections. Orthogonal: independent d x d blocks Q diag(r), Q Haar-distributed
// (QR of a Gaussian matrix with the signs of R's diagonal moved into Q: a plain QR is not Haar,
// see GUIDE "Traps"), r_m ~ chi(d) independent.
arma::mat draw_gaussian_omegas(arma::uword d, arma::uword M, Sampler sampler, Rng& rng);

// A Haar-distributed d x d orthogonal matrix.
arma::mat haar_orthogonal(arma::uword d, Rng& rng);

}  // namespace kestrel
