// The keys of a map with an exponent form (estimators/estimator.hpp), in tiles for single-precision projections:
// the one tiling that the attention simulation's key sums (analysis/nested_attention.cpp) and advise's numerical range
// (tasks/advise/range.cpp) share, so that both see the same keys in the same float rounding.
#pragma once
#include <vector>

#include <armadillo>

#include "estimators/estimator.hpp"

namespace kestrel {

// Keys per tile: a tile's single-precision sum has relative rounding below 1024 * 2^-24 = 6e-5 of sum_j f_j |C_j| (in
// practice ~sqrt(1024) * 2^-24), and tiles are added in double.
constexpr arma::uword kKeyTile = 1024;

// One tile of keys: their exponent points (d' x t) and exponent rows in single precision (for maps with a form), and
// the rows of C. Keys j0..j1 in order, or for a form with groups the keys of one group (sorted by group, then index).
struct KeyTile {
  arma::uword j0 = 0, j1 = 0;
  arma::uword group = 0;
  arma::fmat Y;
  arma::fvec row;
  arma::fmat C;
};

// The tiles of the keys Y (columns) and of C's rows (C may be empty: no C rows). With `form` false only C is tiled, in
// order. row_shift (one per key, or empty) is added to the exponent rows in double before they are rounded (the
// kernel's exp(alpha |y|^2)).
std::vector<KeyTile> key_tiles(const FeatureMap& e, const arma::mat& Y, const arma::mat& C, bool form,
                               const arma::vec& row_shift = {});

}  // namespace kestrel
