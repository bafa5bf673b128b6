// The single-precision key tiles (see key_tiles.hpp).
#include "analysis/key_tiles.hpp"

#include <algorithm>

namespace kestrel {

std::vector<KeyTile> key_tiles(const FeatureMap& e, const arma::mat& Y, const arma::mat& C, bool form,
                               const arma::vec& row_shift) {
  std::vector<KeyTile> tiles;
  ExponentPoints keys = form ? e.exponent_points(Y, Side::Key) : ExponentPoints{};
  if (!row_shift.is_empty()) keys.row += row_shift;
  const auto tile_of = [&](auto&& cols, KeyTile& t) {
    if (form) {
      t.Y = arma::conv_to<arma::fmat>::from(keys.Z.cols(cols));
      t.row = arma::conv_to<arma::fvec>::from(arma::vec(keys.row(cols)));
    }
    if (!C.is_empty()) t.C = arma::conv_to<arma::fmat>::from(C.rows(cols));
    tiles.push_back(std::move(t));
  };
  if (keys.group.is_empty()) {
    for (arma::uword j0 = 0; j0 < Y.n_cols; j0 += kKeyTile) {
      KeyTile t;
      t.j0 = j0;
      t.j1 = std::min(Y.n_cols, j0 + kKeyTile) - 1;
      tile_of(arma::regspace<arma::uvec>(t.j0, t.j1), t);
    }
    return tiles;
  }
  for (arma::uword g : arma::uvec(arma::unique(keys.group))) {
    const arma::uvec in = arma::find(keys.group == g);
    for (arma::uword i0 = 0; i0 < in.n_elem; i0 += kKeyTile) {
      KeyTile t;
      const arma::uvec k = in.subvec(i0, std::min(in.n_elem, i0 + kKeyTile) - 1);
      t.j0 = 0;
      t.j1 = k.n_elem - 1;  // t.j1 - t.j0 + 1 keys; the non-form path (contiguous keys) never sees these
      t.group = g;
      tile_of(k, t);
    }
  }
  return tiles;
}

}  // namespace kestrel
