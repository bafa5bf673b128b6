// Nested-draw simulation of random-feature attention rows (see nested_attention.hpp).
#include "analysis/nested_attention.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/logmath.hpp"
#include "core/parallel.hpp"
#include "core/rng.hpp"
#include "core/vecmath.hpp"

namespace kestrel {

namespace {

// One draw in progress: its nested draw of columns up to the largest grid M it reaches, and the running sums over
// its columns [0, m0): acc_i = sum_m e^{t_im - run_max_i} (S~^T C)_m ([numerator, normaliser]) and, for the total
// variation, the unnormalised attention rows on the same scale.
struct DrawState {
  Draw w;
  arma::uword m0 = 0;
  arma::vec run_max;
  arma::mat acc, Ahat;
};

// One draw's errors at one grid M, per row.
struct RowErrors {
  arma::vec sq, abs, tv;
};

// Columns [a, b) of a draw, as a draw of their own.
Draw columns(const Draw& w, arma::uword a, arma::uword b) {
  Draw s{w.omega.cols(a, b - 1), {}};
  if (!w.phase.is_empty()) s.phase = w.phase.cols(a, b - 1);
  return s;
}

// log f(w_m, x_i) without features()'s 1/sqrt(count): a block's features are those of the whole draw.
arma::mat raw_log_features(const FeatureMap& e, const Draw& w, const arma::mat& X, Side side) {
  arma::mat L = e.log_features(w, X, side);
  L += 0.5 * std::log(static_cast<double>(w.count()));
  return L;
}

// What every draw shares: the points, C = [V, 1] (or 1), the exact rows and normalisers, the exact attention matrix.
struct Problem {
  const FeatureMap& e;
  const arma::mat &X, &Y, &V, &Yexact;
  const arma::vec& log_norm;
  arma::mat C, A;
  bool tv;
};

// Adds the draw's columns [m0, m1) to its sums and returns the rows' errors with its first m1 columns.
RowErrors advance(const Problem& p, DrawState& s, arma::uword m1) {
  const bool values = !p.V.is_empty();
  const arma::uword dv = values ? p.V.n_cols : 0;
  if (m1 > s.m0) {
    const Draw b = columns(s.w, s.m0, m1);
    arma::mat S = raw_log_features(p.e, b, p.Y, Side::Key);  // Ly x B
    const arma::rowvec a = arma::max(S, 0);                  // each key feature's own scale
    S.each_row() -= a;
    simd::exp_libm(S);
    arma::mat T = raw_log_features(p.e, b, p.X, Side::Query);  // Lx x B
    T.each_row() += a;
    const arma::vec new_max = arma::max(s.run_max, arma::max(T, 1));
    const arma::vec shrink = arma::exp(s.run_max - new_max);  // 0 at the first block
    T.each_col() -= new_max;
    simd::exp_libm(T);
    s.acc.each_col() %= shrink;
    s.acc += T * (S.t() * p.C);
    if (p.tv) {
      s.Ahat.each_col() %= shrink;
      s.Ahat += T * S.t();
    }
    s.run_max = new_max;
    s.m0 = m1;
  }
  RowErrors out;
  const arma::vec den = s.acc.col(p.C.n_cols - 1);  // >= 1: the row's largest term has S~ column sum >= 1, weight 1
  if (values) {
    arma::mat Yh = s.acc.head_cols(dv);
    Yh.each_col() /= den;
    const arma::mat diff = Yh - p.Yexact;
    out.sq = arma::sum(arma::square(diff), 1);
    out.abs = arma::mean(arma::abs(diff), 1);
  } else {
    // D-hat_i = e^{run_max_i} den_i / M: relative error expm1(log D-hat - log D), accurate when it is tiny.
    arma::vec rel = s.run_max + arma::log(den) - std::log(static_cast<double>(m1)) - p.log_norm;
    for (double& v : rel) v = std::expm1(v);
    out.sq = arma::square(rel);
  }
  if (p.tv) {
    arma::mat D = s.Ahat;
    D.each_col() /= den;
    out.tv = 0.5 * arma::sum(arma::abs(D - p.A), 1);
  }
  return out;
}

// Column k of the mean over draws 0..n-1 of one error and its standard error.
void reduce(const std::vector<RowErrors>& per, arma::vec RowErrors::*field, std::size_t n, arma::uword k,
            arma::mat& mean, arma::mat& se) {
  const arma::uword Lx = (per[0].*field).n_elem;
  arma::vec s1(Lx, arma::fill::zeros), s2(Lx, arma::fill::zeros);
  for (std::size_t r = 0; r < n; ++r) {
    const arma::vec& v = per[r].*field;
    s1 += v;
    s2 += arma::square(v);
  }
  const double R = static_cast<double>(n);
  mean.resize(Lx, k + 1);
  se.resize(Lx, k + 1);
  mean.col(k) = s1 / R;
  se.col(k) = arma::sqrt(arma::clamp(s2 / R - arma::square(s1 / R), 0, kInf) * (R / (R - 1)) / R);
}

}  // namespace

NestedErrors simulate_nested(const FeatureMap& e, const arma::mat& X, const arma::mat& Y, const arma::mat& V,
                             const arma::mat& Yexact, const arma::vec& log_norm, const NestedOptions& opt,
                             const std::function<bool(const NestedErrors&)>& stop) {
  validate_pair(X, Y, e.dim());
  require(e.info().positive, "the nested attention simulation needs positive features; '{}' can be negative",
          e.info().name);
  const std::size_t G = opt.grid.size();
  require(G > 0 && opt.draws.size() == G, "grid and draws must have the same length > 0, got {} and {}", G,
          opt.draws.size());
  for (std::size_t k = 0; k < G; ++k) {
    require(opt.grid[k] >= 1 && (k == 0 || opt.grid[k] > opt.grid[k - 1]), "grid must ascend from >= 1");
    require(opt.draws[k] >= 2 && (k == 0 || opt.draws[k] <= opt.draws[k - 1]),
            "draws must be >= 2 and non-increasing along the grid");
  }
  require(V.is_empty() ? Yexact.is_empty()
                       : (V.n_rows == Y.n_cols && Yexact.n_rows == X.n_cols && Yexact.n_cols == V.n_cols),
          "values must be Ly x dv with exact rows Lx x dv");
  require(log_norm.n_elem == X.n_cols, "{} log normalisers for {} query rows", log_norm.n_elem, X.n_cols);
  {  // Blocks of a draw must add up to the draw: M K-hat(w) = sum_blocks B K-hat(w_block) (not for hybrids whose
     // features pair draws with each other); probed on one (query, key) pair.
    Rng probe(opt.seed, Stream::Prediction, ~std::uint64_t{0});
    const Draw w = e.draw_nested(2, probe, opt.sampler);
    auto k = [&](const Draw& v) {
      const arma::mat P = e.features(v, X.cols(0, 0), Side::Query), S = e.features(v, Y.cols(0, 0), Side::Key);
      return static_cast<double>(v.count()) * arma::accu(P % S);
    };
    const double whole = k(w), parts = k(columns(w, 0, 1)) + k(columns(w, 1, 2));
    if (!(std::abs(whole - parts) <= 1e-9 * std::abs(whole)))
      throw Undefined(
          fmt::format("'{}' is not a sum over its draws (2 K-hat = {} but the draws' terms add to {}): "
                      "a prefix of its draws is not an estimate with fewer features, so nested draws do "
                      "not apply",
                      e.info().name, whole, parts));
  }
  const bool values = !V.is_empty();
  Problem p{e, X, Y, V, Yexact, log_norm, {}, {}, opt.total_variation};
  p.C = values ? arma::mat(arma::join_rows(V, arma::ones(V.n_rows))) : arma::mat(arma::ones(Y.n_cols, 1));
  if (p.tv) {  // exact attention rows
    p.A = X.t() * Y;
    p.A.each_col() -= log_norm;
    simd::exp_libm(p.A);
  }
  const arma::uword Lx = X.n_cols;
  std::vector<DrawState> state(opt.draws[0]);
  std::vector<RowErrors> per(opt.draws[0]);
  NestedErrors out;
  for (std::size_t k = 0; k < G; ++k) {
    for_each_block(opt.draws[k], [&](std::size_t r) {
      DrawState& s = state[r];
      if (k == 0) {  // draw r reaches the largest grid M with r < draws[.]
        std::size_t n = 0;
        while (n < G && r < opt.draws[n]) ++n;
        Rng rng(opt.seed, Stream::Prediction, r);
        s.w = e.draw_nested(opt.grid[n - 1], rng, opt.sampler);
        s.run_max.set_size(Lx);
        s.run_max.fill(-kInf);
        s.acc.zeros(Lx, p.C.n_cols);
        if (p.tv) s.Ahat.zeros(Lx, Y.n_cols);
      }
      per[r] = advance(p, s, opt.grid[k]);
      if (k + 1 < G && r >= opt.draws[k + 1]) s = DrawState{};  // done: free its sums
    });
    reduce(per, &RowErrors::sq, opt.draws[k], k, out.sq, out.sq_se);
    if (values) reduce(per, &RowErrors::abs, opt.draws[k], k, out.abs, out.abs_se);
    if (p.tv) reduce(per, &RowErrors::tv, opt.draws[k], k, out.tv, out.tv_se);
    if (!out.sq.col(k).is_finite() || (values && !out.abs.col(k).is_finite()) || (p.tv && !out.tv.col(k).is_finite()))
      throw NumericalError(
          fmt::format("the nested simulation of '{}' gave a non-finite error at M = {}", e.info().name, opt.grid[k]));
    if (stop && k + 1 < G && stop(out)) break;
  }
  return out;
}

}  // namespace kestrel
