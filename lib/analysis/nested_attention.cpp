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

// One draw's errors: rows x (grid points it reaches).
struct DrawErrors {
  arma::mat sq, abs, tv;
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

DrawErrors one_draw(const FeatureMap& e, const arma::mat& X, const arma::mat& Y, const arma::mat& V,
                    const arma::mat& Yexact, const arma::vec& log_norm, const arma::mat& A, const NestedOptions& opt,
                    std::size_t r, std::size_t n_points) {
  const bool values = !V.is_empty();
  const arma::uword Lx = X.n_cols, dv = values ? V.n_cols : 0;
  Rng rng(opt.seed, Stream::Prediction, r);
  const Draw w = e.draw_nested(opt.grid[n_points - 1], rng, opt.sampler);
  const arma::mat C = values ? arma::mat(arma::join_rows(V, arma::ones(V.n_rows))) : arma::mat(arma::ones(Y.n_cols, 1));
  DrawErrors out;
  out.sq.set_size(Lx, n_points);
  if (values) out.abs.set_size(Lx, n_points);
  if (opt.total_variation) out.tv.set_size(Lx, n_points);
  arma::vec run_max(Lx, arma::fill::value(-kInf));
  arma::mat acc(Lx, C.n_cols, arma::fill::zeros);  // sum_m e^{t_im - run_max_i} (S~^T C)_m: [numerator, normaliser]
  arma::mat Ahat;                                  // total variation: the unnormalised attention rows, same scale
  if (opt.total_variation) Ahat.zeros(Lx, Y.n_cols);
  arma::uword m0 = 0;
  for (std::size_t k = 0; k < n_points; ++k) {
    const arma::uword m1 = opt.grid[k];
    if (m1 > m0) {
      const Draw b = columns(w, m0, m1);
      arma::mat S = raw_log_features(e, b, Y, Side::Key);  // Ly x B
      const arma::rowvec a = arma::max(S, 0);              // each key feature's own scale
      S.each_row() -= a;
      simd::exp_libm(S);
      arma::mat T = raw_log_features(e, b, X, Side::Query);  // Lx x B
      T.each_row() += a;
      const arma::vec new_max = arma::max(run_max, arma::max(T, 1));
      const arma::vec shrink = arma::exp(run_max - new_max);  // 0 at the first block
      T.each_col() -= new_max;
      simd::exp_libm(T);
      acc.each_col() %= shrink;
      acc += T * (S.t() * C);
      if (opt.total_variation) {
        Ahat.each_col() %= shrink;
        Ahat += T * S.t();
      }
      run_max = new_max;
      m0 = m1;
    }
    const arma::vec den = acc.col(C.n_cols - 1);  // >= 1: the row's largest term has S~ column sum >= 1 and weight 1
    if (values) {
      arma::mat Yh = acc.head_cols(dv);
      Yh.each_col() /= den;
      const arma::mat diff = Yh - Yexact;
      out.sq.col(k) = arma::sum(arma::square(diff), 1);
      out.abs.col(k) = arma::mean(arma::abs(diff), 1);
    } else {
      // D-hat_i = e^{run_max_i} den_i / M: relative error expm1(log D-hat - log D), accurate when it is tiny.
      arma::vec rel = run_max + arma::log(den) - std::log(static_cast<double>(m1)) - log_norm;
      for (double& v : rel) v = std::expm1(v);
      out.sq.col(k) = arma::square(rel);
    }
    if (opt.total_variation) {
      arma::mat D = Ahat;
      D.each_col() /= den;
      out.tv.col(k) = 0.5 * arma::sum(arma::abs(D - A), 1);
    }
  }
  return out;
}

}  // namespace

NestedErrors simulate_nested(const FeatureMap& e, const arma::mat& X, const arma::mat& Y, const arma::mat& V,
                             const arma::mat& Yexact, const arma::vec& log_norm, const NestedOptions& opt) {
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
  require(V.is_empty() ? Yexact.is_empty() : (V.n_rows == Y.n_cols && Yexact.n_rows == X.n_cols &&
                                              Yexact.n_cols == V.n_cols),
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
      throw Undefined(fmt::format("'{}' is not a sum over its draws (2 K-hat = {} but the draws' terms add to {}): "
                                  "a prefix of its draws is not an estimate with fewer features, so nested draws do "
                                  "not apply",
                                  e.info().name, whole, parts));
  }
  arma::mat A;  // exact attention rows, for the total variation
  if (opt.total_variation) {
    A = X.t() * Y;
    A.each_col() -= log_norm;
    simd::exp_libm(A);
  }
  const std::size_t R = opt.draws[0];
  std::vector<DrawErrors> per(R);
  for_each_block(R, [&](std::size_t r) {
    std::size_t n = 0;  // grid points draw r reaches
    while (n < G && r < opt.draws[n]) ++n;
    per[r] = one_draw(e, X, Y, V, Yexact, log_norm, A, opt, r, n);
  });
  NestedErrors out;
  const arma::uword Lx = X.n_cols;
  auto reduce = [&](arma::mat DrawErrors::*field, arma::mat& mean, arma::mat& se) {
    mean.zeros(Lx, G);
    se.zeros(Lx, G);
    for (std::size_t k = 0; k < G; ++k) {
      arma::vec s1(Lx, arma::fill::zeros), s2(Lx, arma::fill::zeros);
      for (std::size_t r = 0; r < opt.draws[k]; ++r) {
        const arma::vec v = (per[r].*field).col(k);
        s1 += v;
        s2 += arma::square(v);
      }
      const double n = static_cast<double>(opt.draws[k]);
      mean.col(k) = s1 / n;
      se.col(k) = arma::sqrt(arma::clamp(s2 / n - arma::square(s1 / n), 0, kInf) * (n / (n - 1)) / n);
    }
  };
  reduce(&DrawErrors::sq, out.sq, out.sq_se);
  if (!V.is_empty()) reduce(&DrawErrors::abs, out.abs, out.abs_se);
  if (opt.total_variation) reduce(&DrawErrors::tv, out.tv, out.tv_se);
  if (!out.sq.is_finite() || !out.abs.is_finite() || !out.tv.is_finite())
    throw NumericalError(fmt::format("the nested simulation of '{}' gave a non-finite error", e.info().name));
  return out;
}

}  // namespace kestrel
