// A sharp attention head for the learned-map tests (learned_attention_test.cpp, advise_learned_test.cpp): several
// sequences of one head whose attention rows each sit on a few keys, where random features fail.
#pragma once
#include <cmath>
#include <cstdint>

#include <armadillo>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "tasks/learned_attention.hpp"

namespace kestrel::test {

// A sharp head: C orthonormal directions u_c shared by every sequence (the head's structure); each query and key is
// a u_c + noise for a uniformly drawn c, so a query's logits are about a^2 / sqrt(d) on the keys of its own direction
// and about 0 on the others, spread by the noise: each row puts almost all of its mass on a few keys.
inline HeadSequences sharp_head(arma::uword n, arma::uword L, std::uint64_t seed = 5) {
  const arma::uword d = 16, C = 8, dv = 8;
  const double a = std::sqrt(6.0 * 4.0), noise = 0.5;  // aligned logits a^2 / sqrt(16) = 6
  Rng rng(seed, Stream::User, 1000);
  arma::mat U, R;
  if (!arma::qr_econ(U, R, rng.normal_matrix(d, C))) throw NumericalError("QR failed");
  HeadSequences h;
  for (arma::uword s = 0; s < n; ++s) {
    Rng r(seed, Stream::User, s);
    arma::mat Q(d, L), K(d, L);
    for (arma::uword j = 0; j < L; ++j) {
      Q.col(j) = a * U.col(static_cast<arma::uword>(r.uniform() * C));
      K.col(j) = a * U.col(static_cast<arma::uword>(r.uniform() * C));
    }
    h.Q.push_back(Q + noise * r.normal_matrix(d, L));
    h.K.push_back(K + noise * r.normal_matrix(d, L));
    h.V.push_back(r.normal_matrix(L, dv));
  }
  return h;
}

}  // namespace kestrel::test
