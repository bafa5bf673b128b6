// Nested-draw simulation of random-feature attention rows (see nested_attention.hpp).
#include "analysis/nested_attention.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>

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

// log f(w_m, x_i) without features()'s 1/sqrt(count): a block's features are those of the whole draw.
arma::mat raw_log_features(const FeatureMap& e, const Draw& w, const arma::mat& X, Side side) {
  arma::mat L = e.log_features(w, X, side);
  L += 0.5 * std::log(static_cast<double>(w.count()));
  return L;
}

// Keys per tile of the single-precision key sums: a tile's sum has relative rounding below 1024 * 2^-24 = 6e-5 of
// sum_j f_j |C_j| (in practice ~sqrt(1024) * 2^-24), and tiles are added in double.
constexpr arma::uword kKeyTile = 1024;

// One tile of keys, contiguous: the keys' exponent points (d x t, for maps with an exponent form) and exponent rows,
// and C's rows.
struct KeyTile {
  arma::uword j0 = 0, j1 = 0;  // keys j0..j1
  arma::fmat Y;
  arma::vec row;
  arma::fmat C;
};

// What every draw shares: the points, C = [V, 1] (or 1), the exact rows and normalisers, the exact attention matrix,
// and the key tiles of the single-precision key sums.
struct Problem {
  const FeatureMap& e;
  const arma::mat &X, &Y, &V, &Yexact;
  const arma::vec& log_norm;
  arma::mat C, A;
  bool tv;
  bool form = false;
  std::vector<KeyTile> tiles;
};

// A tile's log key features, single precision: for maps with an exponent form the projection Y^T P (col and row are
// added in double by the caller); else the family's log_features in double, rounded.
arma::fmat tile_projection(const Problem& p, const KeyTile& t, const Draw& b, const arma::fmat& P32) {
  if (p.form) return t.Y.t() * P32;
  return arma::conv_to<arma::fmat>::from(raw_log_features(p.e, b, p.Y.cols(t.j0, t.j1), Side::Key));
}

// The key sums of a block of feature columns: each column's log scale a_m = max_j log f2(w_m, k_j) and
// S_m = sum_j e^{log f2(w_m, k_j) - a_m} C_j (B x n), over tiles of keys with the online rescaling (a tile that raises
// a_m shrinks the sum so far), so memory is a tile, not Lk x B. Features and tile sums in single precision; the
// exponents col_m + row_j are added in double, so only the projection is rounded (relative 2^-24 d |w| |k|).
std::pair<arma::rowvec, arma::mat> key_sums(const Problem& p, const Draw& b) {
  arma::fmat P32;
  arma::rowvec col;
  if (p.form) {
    const std::optional<ExponentForm> f = p.e.exponent_form(b, Side::Key);
    P32 = arma::conv_to<arma::fmat>::from(f->P);
    col = f->col + 0.5 * std::log(static_cast<double>(b.count()));  // raw features: the whole draw's scale
  }
  arma::rowvec a;
  arma::mat S;
  std::vector<double> buf(kKeyTile);
  for (const KeyTile& t : p.tiles) {
    arma::fmat E = tile_projection(p, t, b, P32);
    const arma::uword n = E.n_rows;
    if (a.is_empty()) {
      a.set_size(E.n_cols);
      a.fill(-kInf);
      S.zeros(E.n_cols, p.C.n_cols);
      if (!p.form) col.zeros(E.n_cols);
    }
    for (arma::uword m = 0; m < E.n_cols; ++m) {
      float* e = E.colptr(m);
      double mx = -kInf;
      for (arma::uword j = 0; j < n; ++j) {
        buf[j] = static_cast<double>(e[j]) + col(m) + (p.form ? t.row(j) : 0.0);
        mx = std::max(mx, buf[j]);
      }
      if (mx > a(m)) {
        S.row(m) *= std::exp(a(m) - mx);  // 0 while a_m = -inf (S_m is 0 then)
        a(m) = mx;
      }
      const double shift = std::isfinite(a(m)) ? a(m) : 0.0;  // a column of structural zeros stays -inf
      for (arma::uword j = 0; j < n; ++j) buf[j] -= shift;
      simd::exp(buf.data(), n);
      for (arma::uword j = 0; j < n; ++j) e[j] = static_cast<float>(buf[j]);
    }
    S += arma::conv_to<arma::mat>::from(arma::fmat(E.t() * t.C));
  }
  a.transform([](double v) { return std::isfinite(v) ? v : 0.0; });
  return {a, S};
}

// The key tiles: keys and exponent rows for maps with an exponent form, C for all.
std::vector<KeyTile> key_tiles(const FeatureMap& e, const arma::mat& Y, const arma::mat& C, bool form) {
  std::vector<KeyTile> tiles;
  const arma::vec row = form ? e.exponent_row(Y, Side::Key) : arma::vec();
  const arma::mat Z = form ? e.exponent_points(Y, Side::Key) : arma::mat();
  for (arma::uword j0 = 0; j0 < Y.n_cols; j0 += kKeyTile) {
    KeyTile t;
    t.j0 = j0;
    t.j1 = std::min(Y.n_cols, j0 + kKeyTile) - 1;
    if (form) {
      t.Y = arma::conv_to<arma::fmat>::from(Z.cols(t.j0, t.j1));
      t.row = row.subvec(t.j0, t.j1);
    }
    t.C = arma::conv_to<arma::fmat>::from(C.rows(t.j0, t.j1));
    tiles.push_back(std::move(t));
  }
  return tiles;
}

// Adds the draw's columns [m0, m1) to its sums and returns the rows' errors with its first m1 columns.
RowErrors advance(const Problem& p, DrawState& s, arma::uword m1) {
  const bool values = !p.V.is_empty();
  const arma::uword dv = values ? p.V.n_cols : 0;
  if (m1 > s.m0) {
    const Draw b = s.w.columns(s.m0, m1);
    arma::rowvec a;
    arma::mat S;  // B x n: S~^T C, or Ly x B features when the total variation needs them
    if (p.tv) {
      S = raw_log_features(p.e, b, p.Y, Side::Key);  // Ly x B
      a = arma::max(S, 0);                           // each key feature's own scale
      S.each_row() -= a;
      simd::exp_libm(S);
    } else {
      std::tie(a, S) = key_sums(p, b);
    }
    arma::mat T = raw_log_features(p.e, b, p.X, Side::Query);  // Lx x B
    T.each_row() += a;
    const arma::vec new_max = arma::max(s.run_max, arma::max(T, 1));
    const arma::vec shrink = arma::exp(s.run_max - new_max);  // 0 at the first block
    T.each_col() -= new_max;
    simd::exp_libm(T);
    s.acc.each_col() %= shrink;
    if (p.tv) {
      s.acc += T * (S.t() * p.C);
      s.Ahat.each_col() %= shrink;
      s.Ahat += T * S.t();
    } else {
      s.acc += T * S;
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

// The draws that keep the relative standard error of the rows' mean squared errors (its 95th percentile over the rows,
// column k, from n draws) near opt.se_goal: n (rse / goal)^2, within [opt.min_draws, n].
std::size_t draws_needed(const arma::mat& sq, const arma::mat& se, arma::uword k, std::size_t n,
                         const NestedOptions& opt) {
  const arma::uvec pos = arma::find(sq.col(k) > 0);
  if (pos.is_empty()) return n;
  const arma::vec col_sq = sq.col(k), col_se = se.col(k);
  arma::vec rse = col_se(pos) / col_sq(pos);
  const arma::uword q = std::min<arma::uword>(rse.n_elem - 1, static_cast<arma::uword>(0.95 * rse.n_elem));
  std::nth_element(rse.begin(), rse.begin() + q, rse.end());
  const double need = std::ceil(static_cast<double>(n) * std::pow(rse(q) / opt.se_goal, 2));
  return std::clamp<std::size_t>(static_cast<std::size_t>(std::min(need, 1e9)), std::min(opt.min_draws, n), n);
}

// The inputs and options checked.
void check_nested(const FeatureMap& e, const arma::mat& X, const arma::mat& Y, const arma::mat& V,
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
  require(opt.min_draws >= 2 && opt.se_goal >= 0, "min_draws must be >= 2 and se_goal >= 0, got {} and {}",
          opt.min_draws, opt.se_goal);
  require(V.is_empty() ? Yexact.is_empty()
                       : (V.n_rows == Y.n_cols && Yexact.n_rows == X.n_cols && Yexact.n_cols == V.n_cols),
          "values must be Ly x dv with exact rows Lx x dv");
  require(log_norm.n_elem == X.n_cols, "{} log normalisers for {} query rows", log_norm.n_elem, X.n_cols);
}

// Blocks of a draw must add up to the draw: M K-hat(w) = sum_blocks B K-hat(w_block) (not for hybrids whose features
// pair draws with each other); probed on one (query, key) pair. Returns whether the map has an exponent form (asked of
// the probe draw).
bool probe_nesting(const FeatureMap& e, const arma::mat& X, const arma::mat& Y, const NestedOptions& opt) {
  Rng probe(opt.seed, Stream::Prediction, ~std::uint64_t{0});
  const Draw w = e.draw_nested(2, probe, opt.sampler);
  auto k = [&](const Draw& v) {
    const arma::mat P = e.features(v, X.cols(0, 0), Side::Query), S = e.features(v, Y.cols(0, 0), Side::Key);
    return static_cast<double>(v.count()) * arma::accu(P % S);
  };
  const double whole = k(w), parts = k(w.columns(0, 1)) + k(w.columns(1, 2));
  if (!(std::abs(whole - parts) <= 1e-9 * std::abs(whole)))
    throw Undefined(
        fmt::format("'{}' is not a sum over its draws (2 K-hat = {} but the draws' terms add to {}): "
                    "a prefix of its draws is not an estimate with fewer features, so nested draws do "
                    "not apply",
                    e.info().name, whole, parts));
  return e.exponent_form(w, Side::Key).has_value();
}

}  // namespace

NestedErrors simulate_nested(const FeatureMap& e, const arma::mat& X, const arma::mat& Y, const arma::mat& V,
                             const arma::mat& Yexact, const arma::vec& log_norm, const NestedOptions& opt,
                             const std::function<bool(const NestedErrors&)>& stop) {
  check_nested(e, X, Y, V, Yexact, log_norm, opt);
  const std::size_t G = opt.grid.size();
  const bool form = probe_nesting(e, X, Y, opt);
  const bool values = !V.is_empty();
  Problem p{e, X, Y, V, Yexact, log_norm, {}, {}, opt.total_variation};
  p.C = values ? arma::mat(arma::join_rows(V, arma::ones(V.n_rows))) : arma::mat(arma::ones(Y.n_cols, 1));
  if (!p.tv) {  // the key sums' single-precision inputs
    p.form = form;
    p.tiles = key_tiles(e, Y, p.C, form);
  }
  if (p.tv) {  // exact attention rows
    p.A = X.t() * Y;
    p.A.each_col() -= log_norm;
    simd::exp_libm(p.A);
  }
  const arma::uword Lx = X.n_cols;
  std::vector<DrawState> state(opt.draws[0]);
  std::vector<RowErrors> per(opt.draws[0]);
  NestedErrors out;
  std::size_t active = opt.draws[0];  // draws still advancing
  for (std::size_t k = 0; k < G; ++k) {
    const std::size_t n = std::min(opt.draws[k], active);
    for_each_block(n, [&](std::size_t r) {
      DrawState& s = state[r];
      if (k == 0) {  // draw r reaches the largest grid M with r < draws[.]
        std::size_t reach = 0;
        while (reach < G && r < opt.draws[reach]) ++reach;
        Rng rng(opt.seed, Stream::Prediction, r);
        s.w = e.draw_nested(opt.grid[reach - 1], rng, opt.sampler);
        s.run_max.set_size(Lx);
        s.run_max.fill(-kInf);
        s.acc.zeros(Lx, p.C.n_cols);
        if (p.tv) s.Ahat.zeros(Lx, Y.n_cols);
      }
      per[r] = advance(p, s, opt.grid[k]);
    });
    reduce(per, &RowErrors::sq, n, k, out.sq, out.sq_se);
    if (values) reduce(per, &RowErrors::abs, n, k, out.abs, out.abs_se);
    if (p.tv) reduce(per, &RowErrors::tv, n, k, out.tv, out.tv_se);
    out.draws.push_back(n);
    if (!out.sq.col(k).is_finite() || (values && !out.abs.col(k).is_finite()) || (p.tv && !out.tv.col(k).is_finite()))
      throw NumericalError(
          fmt::format("the nested simulation of '{}' gave a non-finite error at M = {}", e.info().name, opt.grid[k]));
    if (opt.se_goal > 0 && opt.grid[k] >= opt.adapt_from) active = draws_needed(out.sq, out.sq_se, k, n, opt);
    if (k + 1 < G)
      for (std::size_t r = std::min(opt.draws[k + 1], active); r < n; ++r) state[r] = DrawState{};  // done: free
    if (stop && k + 1 < G && stop(out)) break;
  }
  return out;
}

}  // namespace kestrel
