// Seeded and explicit query-row samples (row_sample.hpp).
#include "analysis/row_sample.hpp"

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace kestrel {

arma::uvec sample_rows(arma::uword L, arma::uword n, std::uint64_t seed) {
  require(n > 0, "rows must be > 0, got {}", n);
  require(n <= L, "rows must be at most the number of query rows L = {} (or all), got {}", L, n);
  if (n == L) return arma::regspace<arma::uvec>(0, L - 1);
  Rng rng(seed, Stream::User, kRowSampleStream);
  std::vector<arma::uword> idx(L);
  std::iota(idx.begin(), idx.end(), arma::uword{0});
  for (arma::uword i = 0; i < n; ++i) {
    const auto step = static_cast<arma::uword>(rng.uniform() * static_cast<double>(L - i));
    std::swap(idx[i], idx[i + std::min<arma::uword>(L - i - 1, step)]);
  }
  idx.resize(n);
  std::sort(idx.begin(), idx.end());
  return arma::uvec(idx);
}

void check_rows(const arma::uvec& rows, arma::uword L) {
  require(!rows.is_empty(), "rows must name at least one query row, got an empty list");
  for (arma::uword r : rows) require(r < L, "row index {} is out of range: there are L = {} query rows", r, L);
  const arma::uvec sorted = arma::sort(rows);
  for (arma::uword i = 1; i < sorted.n_elem; ++i)
    require(sorted[i] != sorted[i - 1], "row index {} is repeated: rows must be distinct", sorted[i]);
}

}  // namespace kestrel
