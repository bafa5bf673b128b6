// Kernel scaling and input checks shared by all estimator families (see estimator.hpp).
#include "estimators/estimator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.hpp"
#include "core/parallel.hpp"

namespace kestrel {

Draw FeatureMap::draw(arma::uword M, Rng& rng, Sampler sampler) const {
  require(M > 0, "number of features M must be > 0, got 0");
  require(fixed_features_ == 0 || M == fixed_features_,
          "estimator '{}' is a learned map with M = {} features, got M = {}", info_.name, fixed_features_, M);
  return draw_hook(M, rng, sampler);
}

Draw Draw::columns(arma::uword a, arma::uword b) const {
  require(tau.is_empty() && omega_trig.is_empty(), "a hybrid's draw has no columns of its own: its draws do not nest");
  Draw s;
  if (!counts.is_empty())
    s.counts = counts.cols(a, b - 1);
  else
    s.omega = omega.cols(a, b - 1);
  if (!phase.is_empty()) s.phase = phase.cols(a, b - 1);
  return s;
}

bool Draw::operator==(const Draw& o) const {
  const auto same = [](const auto& x, const auto& y) {
    return x.n_rows == y.n_rows && x.n_cols == y.n_cols && arma::approx_equal(x, y, "absdiff", 0.0);
  };
  return same(omega, o.omega) && same(phase, o.phase) && same(counts, o.counts) && same(omega_trig, o.omega_trig) &&
         same(tau, o.tau);
}

Draw FeatureMap::draw_hook(arma::uword M, Rng& rng, Sampler sampler) const {
  return Draw{draw_gaussian_omegas(dim(), M, sampler, rng), {}};
}

Draw FeatureMap::draw_nested(arma::uword M, Rng& rng, Sampler sampler) const {
  require(M > 0, "number of features M must be > 0, got 0");
  require(fixed_features_ == 0, "estimator '{}' is a learned map with M = {} features: its draws do not nest",
          info_.name, fixed_features_);
  return nested_draw_hook(M, rng, sampler);
}

Draw FeatureMap::nested_draw_hook(arma::uword M, Rng& rng, Sampler sampler) const { return draw_hook(M, rng, sampler); }

namespace {

void validate_feature_input(const FeatureMap& e, const Draw& w, const arma::mat& X, const arma::vec& log_row_scale) {
  require(X.n_rows == e.dim(), "points have dimension {}, estimator '{}' was fitted for {}", X.n_rows, e.info().name,
          e.dim());
  require(X.is_finite(), "points must be finite (found NaN or Inf)");
  require(w.dim() == e.dim(), "the draw has dimension {}, estimator '{}' was fitted for {}", w.dim(), e.info().name,
          e.dim());
  require(log_row_scale.is_empty() || log_row_scale.n_elem == X.n_cols, "{} row scales for {} points",
          log_row_scale.n_elem, X.n_cols);
}

// The rows' log scales with features()' 1/sqrt(M) added: the estimate is the average of M features. A deterministic
// map's draw has no random objects (M = 0) and no average. A scale of the wrong length stays wrong, for the raw
// functions' check to name.
arma::vec with_average(const arma::vec& log_row_scale, arma::uword L, arma::uword M) {
  if (M == 0) return log_row_scale;
  const double h = -0.5 * std::log(static_cast<double>(M));
  return log_row_scale.is_empty() ? arma::vec(L, arma::fill::value(h)) : arma::vec(log_row_scale + h);
}

}  // namespace

arma::mat FeatureMap::features(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale) const {
  return raw_features(w, X, side, with_average(log_row_scale, X.n_cols, w.count()));
}

arma::mat FeatureMap::log_features(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale) const {
  return raw_log_features(w, X, side, with_average(log_row_scale, X.n_cols, w.count()));
}

arma::mat FeatureMap::raw_features(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale) const {
  validate_feature_input(*this, w, X, log_row_scale);
  return features_hook(w, X, side, log_row_scale, false);
}

arma::mat FeatureMap::raw_log_features(const Draw& w, const arma::mat& X, Side side,
                                       const arma::vec& log_row_scale) const {
  require(info().positive, "estimator '{}' has no log-features: its features are not all positive", info().name);
  validate_feature_input(*this, w, X, log_row_scale);
  return features_hook(w, X, side, log_row_scale, true);
}

std::optional<ExponentForm> FeatureMap::exponent_form(const Draw& w, Side side) const {
  require(w.dim() == dim(), "the draw has dimension {}, estimator '{}' was fitted for {}", w.dim(), info().name, dim());
  std::optional<Exponent> e = exponent_hook(&w, nullptr, side);
  return e ? std::optional<ExponentForm>(std::move(e->form)) : std::nullopt;
}

ExponentPoints FeatureMap::exponent_points(const arma::mat& X, Side side) const {
  validate_feature_input(*this, Draw{arma::mat(dim(), 0)}, X, {});
  std::optional<Exponent> e = exponent_hook(nullptr, &X, side);
  if (!e) throw Undefined(fmt::format("estimator '{}' has no exponent form", info().name));
  return std::move(e->points);
}

std::optional<FeatureMap::Exponent> FeatureMap::exponent_hook(const Draw*, const arma::mat*, Side) const {
  return std::nullopt;
}

arma::mat FeatureMap::from_exponent(arma::mat E, const arma::vec& log_row_scale, bool log) {
  if (!log_row_scale.is_empty()) E.each_col() += log_row_scale;
  return log ? E : exp_parallel(std::move(E));
}

arma::mat FeatureMap::apply_row_scale(arma::mat F, const arma::vec& log_row_scale, bool log) const {
  if (log_row_scale.is_empty() && !log) return F;
  const arma::vec factor = arma::exp(log_row_scale);
  const bool normal = factor.is_empty() || (factor.is_finite() && factor.min() >= std::numeric_limits<double>::min());
  if (log || (info_.positive && !normal)) {
    F = arma::log(F);
    return from_exponent(std::move(F), log_row_scale, log);
  }
  F.each_col() %= factor;
  return F;
}

namespace {

// Feature maps are computed over fixed blocks of points in parallel (features are per point, so the partition, which
// depends only on L, never changes a value), each block a BLAS product plus exp/cos at L1/L2-friendly sizes.
constexpr arma::uword kPointBlock = 256;  // 256 x M = 256 doubles x 256 = 512 KiB: in L2

arma::uword n_point_blocks(arma::uword L) { return (L + kPointBlock - 1) / kPointBlock; }
arma::span point_block(arma::uword b, arma::uword L) {
  return arma::span(b * kPointBlock, std::min(L, (b + 1) * kPointBlock) - 1);
}

arma::mat block_features(const FeatureMap& e, const Draw& w, const arma::mat& X, Side side, const Kernel& k) {
  return k.alpha == 0.0 ? e.features(w, X, side) : e.features(w, X, side, k.alpha * arma::sum(arma::square(X), 0).t());
}

[[noreturn]] void throw_overflow(const FeatureMap& e, const arma::mat& X) {
  throw NumericalError(fmt::format("estimator '{}': features overflow for points with |x|^2 up to {:g}", e.info().name,
                                   arma::sum(arma::square(X), 0).max()));
}

}  // namespace

arma::mat feature_map(const FeatureMap& e, const Draw& w, const arma::mat& X, Side side, const Kernel& k) {
  require(X.n_rows == e.dim(), "points have dimension {}, estimator '{}' was fitted for {}", X.n_rows, e.info().name,
          e.dim());
  require(X.is_finite(), "points must be finite (found NaN or Inf)");  // else it would look like an overflow
  const arma::uword L = X.n_cols;
  if (L <= kPointBlock) {
    arma::mat F = block_features(e, w, X, side, k);
    if (!F.is_finite()) throw_overflow(e, X);
    return F;
  }
  arma::mat F(L, block_features(e, w, X.col(0), side, k).n_cols, arma::fill::none);  // one point: column count
  std::vector<char> finite(n_point_blocks(L));
  for_each_block(finite.size(), [&](std::size_t b) {
    const arma::span rows = point_block(b, L);
    F.rows(rows) = block_features(e, w, X.cols(rows), side, k);
    finite[b] = F.rows(rows).is_finite();
  });
  if (std::find(finite.begin(), finite.end(), 0) != finite.end()) throw_overflow(e, X);
  return F;
}

arma::mat approximate_kernel(const FeatureMap& e, const Draw& w, const arma::mat& X, const arma::mat& Y,
                             const Kernel& k) {
  const arma::mat St = feature_map(e, w, Y, Side::Key, k).t();
  arma::mat out(X.n_cols, Y.n_cols, arma::fill::none);
  for_each_block(n_point_blocks(X.n_cols), [&](std::size_t b) {
    const arma::span rows = point_block(b, X.n_cols);
    out.rows(rows) = feature_map(e, w, X.cols(rows), Side::Query, k) * St;
  });
  return out;
}

arma::mat approximate_kernel_times(const FeatureMap& e, const Draw& w, const arma::mat& X, const arma::mat& Y,
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
        if (acc.is_empty())
          acc = p;
        else
          acc += p;
      },
      arma::mat());
  arma::mat out(X.n_cols, C.n_cols, arma::fill::none);
  for_each_block(n_point_blocks(X.n_cols), [&](std::size_t b) {
    const arma::span rows = point_block(b, X.n_cols);
    out.rows(rows) = feature_map(e, w, X.cols(rows), Side::Query, k) * StC;
  });
  return out;
}

arma::mat Estimator::log_var_over_k2(const arma::mat& X, const arma::mat& Y) const {
  validate_pair(X, Y, dim());
  return log_var_hook(PairGram(X, Y));
}

arma::mat Estimator::log_var_over_k2_m(const arma::mat& X, const arma::mat& Y, arma::uword M) const {
  return log_var_over_k2_m(PairGram(X, Y), M);
}

arma::mat Estimator::log_var_over_k2_m(const PairGram& g, arma::uword M) const {
  require(M > 0, "number of features M must be > 0, got 0");
  validate_pair(g.X, g.Y, dim());
  return log_var_m_hook(g, M);
}

arma::mat Estimator::log_var_m_hook(const PairGram& g, arma::uword M) const {
  arma::mat r = log_var_hook(g);
  if (M > 1) r -= std::log(static_cast<double>(M));  // log 1 = 0: no pass
  return r;
}

arma::mat log_variance(const Estimator& e, const Kernel& k, const arma::mat& X, const arma::mat& Y, arma::uword M) {
  const PairGram g(X, Y);
  arma::mat r = e.log_var_over_k2_m(g, M);  // validates first
  r += 2.0 * log_kernel(k, g);
  return r;
}

void validate_pair(const arma::mat& X, const arma::mat& Y, arma::uword d) {
  validate_sets(X, Y);
  require(X.n_rows == d, "points have dimension {}, estimator expects {}", X.n_rows, d);
}

}  // namespace kestrel
