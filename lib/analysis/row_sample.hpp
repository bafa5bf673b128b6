// Query-row samples for the per-row exact quantities at long context (kc_moments, ratio_moments,
// predict_attention_error): a seeded sample of n of L rows, or a checked list of indices.
#pragma once
#include <cstdint>

#include <armadillo>

namespace kestrel {

// n distinct rows of [0, L), sorted, drawn from stream (seed, User, kRowSampleStream) by a partial Fisher-Yates
// shuffle: the same rows for the same (L, n, seed) on any machine. n == L gives every row. Throws InvalidArgument
// naming n when n == 0 or n > L.
inline constexpr std::uint64_t kRowSampleStream = 35;
arma::uvec sample_rows(arma::uword L, arma::uword n, std::uint64_t seed);

// Throws InvalidArgument naming the value unless rows is non-empty, every index is < L and none repeats.
void check_rows(const arma::uvec& rows, arma::uword L);

}  // namespace kestrel
