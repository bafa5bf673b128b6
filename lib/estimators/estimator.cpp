// Kernel scaling and input checks shared by all estimator families (see estimator.hpp).
#include "estimators/estimator.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "core/parallel.hpp"

namespace kestrel {

Draw Estimator::draw(arma::uword M, Rng& rng, Sampler sampler) const {
  require(M > 0, "number of features M must be > 0, got 0");
  return Draw{draw_gaussian_omegas(dim(), M, sampler, rng), {}};
}

arma::mat Estimator::log_features(const Draw& w, const arma::mat& X, Side side) const {
  require(info().positive, "estimator '{}' has no log-features: its features are not all positive", info().name);
  return arma::log(features(w, X, side));
}

namespace {

// Feature maps are computed over fixed blocks of points in parallel (features are per point, so the partition, which
// depends only on L, never changes a value), each block a BLAS product plus exp/cos at L1/L2-friendly sizes.
constexpr arma::uword kPointBlock = 256;  // 256 x M = 256 doubles x 256 = 512 KiB: in L2

arma::uword n_point_blocks(arma::uword L) { return (L + kPointBlock - 1) / kPointBlock; }
arma::span point_block(arma::uword b, arma::uword L) {
  return arma::span(b * kPointBlock, std::min(L, (b + 1) * kPointBlock) - 1);
}

arma::mat block_features(const Estimator& e, const Draw& w, const arma::mat& X, Side side, const Kernel& k) {
  return k.alpha == 0.0 ? e.features(w, X, side)
                        : e.scaled_features(w, X, side, k.alpha * arma::sum(arma::square(X), 0).t());
}

[[noreturn]] void throw_overflow(const Estimator& e, const arma::mat& X) {
  throw NumericalError(fmt::format("estimator '{}': features overflow for points with |x|^2 up to {:g}", e.info().name,
                                   arma::sum(arma::square(X), 0).max()));
}

}  // namespace

arma::mat feature_map(const Estimator& e, const Draw& w, const arma::mat& X, Side side, const Kernel& k) {
  require(X.n_rows == e.dim(), "points have dimension {}, estimator '{}' was fitted for {}", X.n_rows,
          e.info().name, e.dim());
  require(X.is_finite(), "points must be finite (found NaN or Inf)");  // else it would look like an overflow
  const arma::uword L = X.n_cols;
  if (L <= kPointBlock) {
    arma::mat F = block_features(e, w, X, side, k);
    if (!F.is_finite())
      throw_overflow(e, X);
    return F;
  }
  arma::mat F(L, block_features(e, w, X.col(0), side, k).n_cols, arma::fill::none);  // one point: column count
  std::vector<char> finite(n_point_blocks(L));
  for_each_block(finite.size(), [&](std::size_t b) {
    const arma::span rows = point_block(b, L);
    F.rows(rows) = block_features(e, w, X.cols(rows), side, k);
    finite[b] = F.rows(rows).is_finite();
  });
  if (std::find(finite.begin(), finite.end(), 0) != finite.end())
    throw_overflow(e, X);
  return F;
}

arma::mat Estimator::scaled_features(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale) const {
  require(log_row_scale.n_elem == X.n_cols, "{} row scales for {} points", log_row_scale.n_elem, X.n_cols);
  if (info().positive) {
    arma::mat F = log_features(w, X, side);
    F.each_col() += log_row_scale;
    return exp_parallel(std::move(F));
  }
  arma::mat F = features(w, X, side);
  F.each_col() %= arma::exp(log_row_scale);
  return F;
}

arma::mat approximate_kernel(const Estimator& e, const Draw& w, const arma::mat& X, const arma::mat& Y,
                             const Kernel& k) {
  const arma::mat St = feature_map(e, w, Y, Side::Key, k).t();
  arma::mat out(X.n_cols, Y.n_cols, arma::fill::none);
  for_each_block(n_point_blocks(X.n_cols), [&](std::size_t b) {
    const arma::span rows = point_block(b, X.n_cols);
    out.rows(rows) = feature_map(e, w, X.cols(rows), Side::Query, k) * St;
  });
  return out;
}

arma::mat approximate_kernel_times(const Estimator& e, const Draw& w, const arma::mat& X, const arma::mat& Y,
                                   const arma::mat& C, const Kernel& k) {
  require(C.n_rows == Y.n_cols, "C must have one row per point of Y ({}), got {}", Y.n_cols, C.n_rows);
  // S^T C summed over key blocks in block order, then P (S^T C) per query block: neither P nor S is ever whole.
  const arma::mat StC = map_fold_blocks<arma::mat>(
      n_point_blocks(Y.n_cols),
      [&](std::size_t b) {
        const arma::span rows = point_block(b, Y.n_cols);
        return arma::mat(feature_map(e, w, Y.cols(rows), Side::Key, k).t() * C.rows(rows));
      },
      [](arma::mat& acc, const arma::mat& p) {
        if (acc.is_empty()) acc = p;
        else acc += p;
      },
      arma::mat());
  arma::mat out(X.n_cols, C.n_cols, arma::fill::none);
  for_each_block(n_point_blocks(X.n_cols), [&](std::size_t b) {
    const arma::span rows = point_block(b, X.n_cols);
    out.rows(rows) = feature_map(e, w, X.cols(rows), Side::Query, k) * StC;
  });
  return out;
}

arma::mat Estimator::log_var_over_k2_m(const arma::mat& X, const arma::mat& Y, arma::uword M) const {
  require(M > 0, "number of features M must be > 0, got 0");
  arma::mat r = log_var_over_k2(X, Y);
  r -= std::log(static_cast<double>(M));
  return r;
}

arma::mat log_variance(const Estimator& e, const Kernel& k, const arma::mat& X, const arma::mat& Y, arma::uword M) {
  validate_pair(X, Y, e.dim());
  return e.log_var_over_k2_m(X, Y, M) + 2.0 * log_kernel(k, X, Y);
}

void validate_pair(const arma::mat& X, const arma::mat& Y, arma::uword d) {
  validate_sets(X, Y);
  require(X.n_rows == d, "points have dimension {}, estimator expects {}", X.n_rows, d);
}

}  // namespace kestrel
