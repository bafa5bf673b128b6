// Nested-draw simulation of random-feature attention rows (see nested_attention.hpp).
#include "analysis/nested_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>

#include "analysis/key_tiles.hpp"
#include "analysis/nested_state.hpp"
#include "core/error.hpp"
#include "core/logmath.hpp"
#include "core/parallel.hpp"
#include "core/rng.hpp"
#include "core/vecmath.hpp"

namespace kestrel {

using nested::advance_causal_single;
using nested::DrawState;
using nested::kAllGroups;
using nested::kCausalChunkColumns;
using nested::KeyGroup;
using nested::Problem;

namespace {

// One draw's errors at one grid M, per row.
struct RowErrors {
  arma::vec sq, abs, tv;
  arma::vec c;  // D-hat_i / D_i - 1: the control variate (mean exactly 0)
};

// Feature columns per chunk of the batched key sums (the columns of all draws at one grid point side by side), and
// key tiles per group: a (chunk, group) pair is one task, so the key sums of one grid point are in parallel across
// columns and keys alike, and every matrix product is one tile by up to 128 columns. Fixed sizes: the sums do not
// depend on the thread count.
constexpr arma::uword kChunkColumns = 128;
constexpr std::size_t kTilesPerGroup = 8;
// Draws whose key sums are computed together hold at most this many new columns (or one draw): memory.
constexpr arma::uword kWaveColumns = 4096;

// A run of feature columns whose key sums are computed together: with an exponent form, columns of several draws'
// blocks (their projections P and exponent columns col); without one, one draw's block (its log-features are asked
// of the family tile by tile).
struct Chunk {
  arma::fmat P;
  arma::rowvec col;
  const Draw* block = nullptr;
  arma::uword width = 0;
  arma::uvec at;                   // the columns' places among all blocks' columns
  arma::uword group = kAllGroups;  // a form with groups: the keys the columns belong to
};

// Key sums of a chunk's columns over some keys: per column its log scale a_m = max_j log f2(w_m, k_j) over those keys
// and S_m = sum_j e^{log f2(w_m, k_j) - a_m} C_j (width x n). a_m = -inf (and S_m = 0) where every feature is 0.
struct KeySums {
  arma::rowvec a;
  arma::mat S;
};

// Adds sums over other keys (a later group of tiles) to s: the larger scale wins, the other sum is rescaled.
void merge(KeySums& s, const KeySums& t) {
  for (arma::uword m = 0; m < s.a.n_elem; ++m) {
    const double top = std::max(s.a(m), t.a(m));
    if (top == -kInf) continue;
    s.S.row(m) = s.S.row(m) * std::exp(s.a(m) - top) + t.S.row(m) * std::exp(t.a(m) - top);
    s.a(m) = top;
  }
}

// The key sums of one chunk over the tiles [t0, t1), tile by tile with the online rescaling (a tile that raises a_m
// shrinks the sum so far), memory a tile by the chunk's columns. Exponent form: the projection Z^T P and the exponent
// rows are added in single precision, the columns' col_m only enter the scale a_m (double); each column is
// exponentiated in single precision after subtracting its running scale, so every feature is <= 1. Without one: the
// family's log-features in double, minus the scale, rounded to single precision and exponentiated. Tile sums
// E^T C in single precision, added in double.
KeySums chunk_sums(const Problem& p, const Chunk& c, std::size_t t0, std::size_t t1) {
  KeySums out;
  out.a.set_size(c.width);
  out.a.fill(-kInf);
  out.S.zeros(c.width, p.C.n_cols);
  arma::fmat E;
  arma::mat L;
  for (std::size_t t = t0; t < t1; ++t) {
    const KeyTile& kt = p.tiles[t];
    if (c.group != kAllGroups && kt.group != c.group) continue;  // features 0 there
    const arma::uword n = kt.j1 - kt.j0 + 1;
    if (p.form)
      E = kt.Y.t() * c.P;
    else {
      L = p.e.raw_log_features(*c.block, p.Y.cols(kt.j0, kt.j1), Side::Key);
      E.set_size(n, c.width);
    }
    for (arma::uword m = 0; m < c.width; ++m) {
      float* e = E.colptr(m);
      double top;  // the tile's largest log-feature in column m
      if (p.form) {
        top = static_cast<double>(simd::add_max(e, kt.row.memptr(), n)) + c.col(m);
      } else {
        top = L.col(m).max();
      }
      if (top > out.a(m)) {
        out.S.row(m) *= std::exp(out.a(m) - top);  // 0 while a_m = -inf (S_m is 0 then)
        out.a(m) = top;
      }
      if (out.a(m) == -kInf) {  // every feature of the column so far is 0
        std::fill(e, e + n, 0.0f);
        continue;
      }
      if (p.form) {
        simd::exp_shifted(e, n, static_cast<float>(out.a(m) - c.col(m)));
      } else {
        const double* l = L.colptr(m);
        for (arma::uword j = 0; j < n; ++j) e[j] = static_cast<float>(l[j] - out.a(m));
        simd::exp_shifted(e, n, 0.0f);
      }
    }
    out.S += arma::conv_to<arma::mat>::from(arma::fmat(E.t() * kt.C));
  }
  return out;
}

// The key sums of every column of the blocks (one per draw, all of the same columns of their draws): chunks of columns
// by groups of tiles, in parallel, the groups of a chunk merged in order. Returns the sums of each block.
std::vector<KeySums> key_sums(const Problem& p, const std::vector<Draw>& blocks) {
  std::vector<Chunk> chunks;
  std::vector<arma::uword> width(blocks.size());  // the feature columns of each block
  arma::uword total = 0;
  if (p.form) {
    std::vector<ExponentForm> forms(blocks.size());
    for_each_block(blocks.size(), [&](std::size_t r) { forms[r] = *p.e.exponent_form(blocks[r], Side::Key); });
    for (std::size_t r = 0; r < blocks.size(); ++r) total += width[r] = forms[r].P.n_cols;
    arma::mat P(forms[0].P.n_rows, total);
    arma::rowvec col(total);
    arma::uvec group(total, arma::fill::value(kAllGroups));
    for (std::size_t r = 0, c0 = 0; r < blocks.size(); c0 += width[r], ++r) {
      P.cols(c0, c0 + width[r] - 1) = forms[r].P;
      col.subvec(c0, c0 + width[r] - 1) = forms[r].col;
      if (!forms[r].group.is_empty()) group.subvec(c0, c0 + width[r] - 1) = forms[r].group;
    }
    // Chunks of one group each (a chunk's columns then skip the other groups' tiles), groups in ascending order.
    const arma::uvec groups = arma::unique(group);
    for (arma::uword g : groups) {
      const arma::uvec at = arma::find(group == g);
      for (arma::uword i0 = 0; i0 < at.n_elem; i0 += kChunkColumns) {
        const arma::uvec cols = at.subvec(i0, std::min(at.n_elem, i0 + kChunkColumns) - 1);
        chunks.push_back({arma::conv_to<arma::fmat>::from(P.cols(cols)), arma::rowvec(col.cols(cols)), nullptr,
                          cols.n_elem, cols, g});
      }
    }
  } else {
    for (std::size_t r = 0; r < blocks.size(); ++r) {
      width[r] = p.e.raw_log_features(blocks[r], p.Y.cols(0, 0), Side::Key).n_cols;
      chunks.push_back({{}, {}, &blocks[r], width[r], arma::regspace<arma::uvec>(total, total + width[r] - 1)});
      total += width[r];
    }
  }
  const std::size_t groups = (p.tiles.size() + kTilesPerGroup - 1) / kTilesPerGroup;
  std::vector<KeySums> part(chunks.size() * groups);
  for_each_block(part.size(), [&](std::size_t i) {
    const std::size_t g = i % groups;
    part[i] = chunk_sums(p, chunks[i / groups], g * kTilesPerGroup, std::min(p.tiles.size(), (g + 1) * kTilesPerGroup));
  });
  KeySums all{arma::rowvec(total), arma::mat(total, p.C.n_cols)};  // every column, in block order
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    KeySums& s = part[c * groups];
    for (std::size_t g = 1; g < groups; ++g) merge(s, part[c * groups + g]);
    all.a.cols(chunks[c].at) = s.a;
    all.S.rows(chunks[c].at) = s.S;
  }
  all.a.transform([](double v) { return std::isfinite(v) ? v : 0.0; });  // a column of structural zeros: S_m = 0
  std::vector<KeySums> out(blocks.size());
  for (std::size_t r = 0, c0 = 0; r < blocks.size(); c0 += width[r], ++r)
    out[r] = {all.a.subvec(c0, c0 + width[r] - 1), all.S.rows(c0, c0 + width[r] - 1)};
  return out;
}

// A form with groups (the clustered HRF) gives a query features only in its group's columns. One group's block: its
// query rows, its columns, and the queries' log-features there (without the 1/sqrt(count)).
struct GroupBlock {
  arma::uvec rows, cols;
  arma::mat T;
};
std::vector<GroupBlock> group_blocks(const Problem& p, const ExponentForm& f) {
  std::vector<GroupBlock> out;
  for (arma::uword g : arma::unique(f.group).eval()) {
    GroupBlock b{arma::find(p.group_q == g), arma::find(f.group == g), {}};
    if (b.rows.is_empty()) continue;
    b.T = p.Zq.cols(b.rows).t() * f.P.cols(b.cols);
    b.T.each_row() += f.col.cols(b.cols);
    b.T.each_col() += p.row_q.elem(b.rows);
    out.push_back(std::move(b));
  }
  return out;
}

// The queries' log-features of a block (Lx x F), without features()'s 1/sqrt(count) (raw_log_features): from the
// exponent form when the map has one (points and rows computed once), else asked of the family. A form with groups:
// its groups' blocks, and 0 (log -inf) elsewhere.
arma::mat query_log_features(const Problem& p, const Draw& b) {
  if (!p.form) return p.e.raw_log_features(b, p.X, Side::Query);
  const std::optional<ExponentForm> f = p.e.exponent_form(b, Side::Query);
  if (f->group.is_empty()) {
    arma::mat T = p.Zq.t() * f->P;
    T.each_row() += f->col;
    T.each_col() += p.row_q;
    return T;
  }
  arma::mat T(p.X.n_cols, f->P.n_cols, arma::fill::value(-kInf));
  for (const GroupBlock& g : group_blocks(p, *f)) T.submat(g.rows, g.cols) = g.T;
  return T;
}

// A form with groups: adds a block b of the draw's columns, with their key sums (a, S), to its sums group by group,
// each group's queries with its own columns only (their features in the other columns are 0), so that no entry
// outside the groups' blocks is formed, exponentiated or multiplied.
void advance_groups(const Problem& p, DrawState& s, const Draw& b, const KeySums& ks) {
  for (GroupBlock& g : group_blocks(p, *p.e.exponent_form(b, Side::Query))) {
    arma::mat& T = g.T;
    T.each_row() += ks.a.cols(g.cols);
    const arma::vec old = s.run_max.elem(g.rows), top = arma::max(old, arma::max(T, 1));
    T.each_col() -= top;
    simd::exp_libm(T);
    arma::mat acc = s.acc.rows(g.rows);
    acc.each_col() %= arma::exp(old - top);  // 0 at the first block
    s.acc.rows(g.rows) = acc + T * ks.S.rows(g.cols);
    s.run_max.elem(g.rows) = top;
  }
}

// Causal: adds a block b of the draw's columns to its sums with the prefix sums of the keys up to each row's position.
// The keys are walked once in order, in segments between consecutive rows' positions; each segment raises the scale
// a_m to the running maximum (the sums so far shrink by e^(a_old - a_new)), so every prefix sum
// S~_m(j) = sum_{j' <= j} e^{log f2(w_m, k_j') - a_m(j)} C_j' has a_m(j) = max_{j' <= j} log f2(w_m, k_j'): exact.
void advance_causal(const Problem& p, DrawState& s, const Draw& b) {
  // Keys as columns (B x keys), so that a segment of keys is one contiguous block (keys beyond the last position are
  // formed and not used: cheaper than copying Y's first columns).
  const arma::mat Ft = p.e.raw_log_features(b, p.Y, Side::Key).t();
  const arma::mat Tt = query_log_features(p, b).t();  // B x Lx
  const arma::uword B = Ft.n_rows, n = p.C.n_cols;
  arma::vec a(B, arma::fill::value(-kInf));  // the prefix's scale per column
  arma::mat S(B, n, arma::fill::zeros);      // the prefix's sums on that scale
  arma::uword next = 0;                      // the first key not yet in the prefix
  for (arma::uword i : p.order) {
    const arma::uword pos = p.positions(i);
    if (pos >= next) {  // the segment next..pos, on its own scale, merged: the larger scale wins
      arma::mat E = Ft.cols(next, pos);
      const arma::vec top = arma::max(a, simd::row_max(E));
      E.each_col() -= top;
      simd::exp_libm(E);                 // std::exp's bits, 8 at a time
      E.replace(arma::datum::nan, 0.0);  // columns whose features are all 0 so far (-inf - -inf)
      arma::vec shrink = arma::exp(a - top);
      shrink.replace(arma::datum::nan, 0.0);
      S.each_col() %= shrink;
      S += E * p.Ct.cols(next, pos).t();
      a = top;
      next = pos + 1;
    }
    arma::vec t = Tt.col(i) + a;
    const double m = std::max(s.run_max(i), t.max());
    const double shrink = std::exp(s.run_max(i) - m);  // 0 at the first block
    t = arma::exp(t - m);
    s.acc.row(i) = s.acc.row(i) * shrink + t.t() * S;
    s.run_max(i) = m;
  }
}

// The rows' errors from sums held transposed (causal in single precision: acc_t, n x Lx), as advance() forms them from
// acc (the same operations in the same order, so the same bits), without transposing the sums back.
RowErrors errors_transposed(const Problem& p, const DrawState& s, arma::uword m1) {
  const arma::uword n = s.acc_t.n_rows, Lx = s.acc_t.n_cols, dv = p.V.is_empty() ? 0 : p.V.n_cols;
  RowErrors out;
  const arma::vec den = s.acc_t.row(n - 1).t();
  out.c = s.run_max + arma::log(den) - std::log(static_cast<double>(m1)) - p.log_norm;
  for (double& v : out.c) v = std::expm1(v);
  if (dv == 0) {
    out.sq = arma::square(out.c);
    return out;
  }
  out.sq.set_size(Lx);
  out.abs.set_size(Lx);
  for (arma::uword i = 0; i < Lx; ++i) {
    const double* a = s.acc_t.colptr(i);
    const double* y = p.Yexact_t.colptr(i);
    double sq = 0, ab = 0;
    for (arma::uword c = 0; c < dv; ++c) {
      const double diff = a[c] / den[i] - y[c];
      sq += diff * diff;
      ab += std::abs(diff);
    }
    out.sq[i] = sq;
    out.abs[i] = ab / static_cast<double>(dv);
  }
  return out;
}

// Adds the draw's columns [m0, m1) to its sums (with their key sums ks, unless the total variation is asked) and
// returns the rows' errors with its first m1 columns.
RowErrors advance(const Problem& p, DrawState& s, arma::uword m1, const KeySums* ks) {
  const bool values = !p.V.is_empty();
  const arma::uword dv = values ? p.V.n_cols : 0;
  if (m1 > s.m0 && !p.positions.is_empty()) {
    advance_causal(p, s, s.w.columns(s.m0, m1));
    s.m0 = m1;
  } else if (m1 > s.m0 && !p.tv && !p.group_q.is_empty()) {
    advance_groups(p, s, s.w.columns(s.m0, m1), *ks);
    s.m0 = m1;
  } else if (m1 > s.m0) {
    const Draw b = s.w.columns(s.m0, m1);
    arma::rowvec a;
    arma::mat S;  // B x n: S~^T C, or Ly x B features when the total variation needs them
    if (p.tv) {
      S = p.e.raw_log_features(b, p.Y, Side::Key);  // Ly x B
      a = arma::max(S, 0);                          // each key feature's own scale
      S.each_row() -= a;
      simd::exp_libm(S);
    } else {
      a = ks->a;
      S = ks->S;
    }
    arma::mat T = query_log_features(p, b);  // Lx x B
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
  if (!s.acc_t.is_empty()) return errors_transposed(p, s, m1);
  RowErrors out;
  const arma::vec den = s.acc.col(p.C.n_cols - 1);  // >= 1: the row's largest term has S~ column sum >= 1, weight 1
  // D-hat_i = e^{run_max_i} den_i / M: relative error expm1(log D-hat - log D), accurate when it is tiny.
  out.c = s.run_max + arma::log(den) - std::log(static_cast<double>(m1)) - p.log_norm;
  for (double& v : out.c) v = std::expm1(v);
  if (values) {
    arma::mat Yh = s.acc.head_cols(dv);
    Yh.each_col() /= den;
    const arma::mat diff = Yh - p.Yexact;
    out.sq = arma::sum(arma::square(diff), 1);
    out.abs = arma::mean(arma::abs(diff), 1);
  } else {
    out.sq = arma::square(out.c);
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
  if (!opt.positions.is_empty()) {
    require(opt.positions.n_elem == X.n_cols, "{} positions for {} query rows", opt.positions.n_elem, X.n_cols);
    require(opt.positions.max() < Y.n_cols, "position {} is beyond the {} keys", opt.positions.max(), Y.n_cols);
    require(!opt.total_variation, "the total variation is not simulated for causal attention");
  }
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

namespace nested {

// query_log_features transposed (B x Lx), formed so for a form without groups: a draw's column is contiguous per row.
arma::mat query_log_features_t(const Problem& p, const Draw& b) {
  if (!p.form) return query_log_features(p, b).t();
  const std::optional<ExponentForm> f = p.e.exponent_form(b, Side::Query);
  if (!f->group.is_empty()) return query_log_features(p, b).t();
  arma::mat Tt = f->P.t() * p.Zq;
  Tt.each_col() += f->col.t();
  Tt.each_row() += p.row_q.t();
  return Tt;
}

}  // namespace nested

// Causal: the rows' positions and order, and in single precision (form) the queries' and keys' exponent points, C^T
// in single precision and the exact rows transposed; else C^T in double.
void prepare_causal(Problem& p, bool form, const arma::uvec& positions) {
  p.positions = positions;
  p.order = arma::stable_sort_index(positions);
  const arma::uword end = positions.max() + 1;
  p.form = form;
  if (!form) {
    p.Ct = p.C.t();
    return;
  }
  ExponentPoints q = p.e.exponent_points(p.X, Side::Query), k = p.e.exponent_points(p.Y.cols(0, end - 1), Side::Key);
  p.Zq = std::move(q.Z), p.row_q = std::move(q.row), p.group_q = std::move(q.group);
  const arma::fmat Zk = arma::conv_to<arma::fmat>::from(k.Z),
                   Ctf = arma::conv_to<arma::fmat>::from(p.C.rows(0, end - 1).t());
  const arma::frowvec row_k = arma::conv_to<arma::frowvec>::from(k.row.t());
  const arma::uvec ids = k.group.is_empty() ? arma::uvec{kAllGroups} : arma::unique(k.group).eval();
  for (arma::uword id : ids) {
    const arma::uvec keys =
        id == kAllGroups ? arma::regspace<arma::uvec>(0, end - 1) : arma::find(k.group == id).eval();
    KeyGroup g{id, Zk.cols(keys), Ctf.cols(keys), row_k.cols(keys), arma::uvec(positions.n_elem)};
    for (arma::uword i = 0; i < positions.n_elem; ++i)
      g.upto(i) = static_cast<arma::uword>(std::upper_bound(keys.begin(), keys.end(), positions(i)) - keys.begin());
    p.key_groups.push_back(std::move(g));
  }
  if (!p.V.is_empty()) p.Yexact_t = p.Yexact.t();
}

NestedErrors simulate_nested(const FeatureMap& e, const arma::mat& X, const arma::mat& Y, const arma::mat& V,
                             const arma::mat& Yexact, const arma::vec& log_norm, const NestedOptions& opt,
                             const std::function<std::size_t(const NestedErrors&)>& next) {
  check_nested(e, X, Y, V, Yexact, log_norm, opt);
  const std::size_t G = opt.grid.size();
  const bool form = probe_nesting(e, X, Y, opt);
  const bool values = !V.is_empty();
  Problem p{e, X, Y, V, Yexact, log_norm, {}, {}, opt.total_variation};
  p.C = values ? arma::mat(arma::join_rows(V, arma::ones(V.n_rows))) : arma::mat(arma::ones(Y.n_cols, 1));
  if (!opt.positions.is_empty()) {  // causal: prefix sums, in single precision where the map allows (see above)
    prepare_causal(p, form && !opt.double_precision, opt.positions);
  } else if (!p.tv) {  // the key sums' single-precision inputs, and the queries' exponent points
    p.form = form;
    p.tiles = key_tiles(e, Y, p.C, form);
    if (form) {
      ExponentPoints q = e.exponent_points(X, Side::Query);
      p.Zq = std::move(q.Z), p.row_q = std::move(q.row), p.group_q = std::move(q.group);
    }
  }
  if (p.tv) {  // exact attention rows
    p.A = X.t() * Y;
    p.A.each_col() -= log_norm;
    simd::exp_libm(p.A);
  }
  const arma::uword Lx = X.n_cols;
  const bool causal_single = !p.positions.is_empty() && p.form;
  std::vector<DrawState> state(opt.draws[0]);
  std::vector<RowErrors> per(opt.draws[0]);
  NestedErrors out;
  std::size_t active = opt.draws[0];  // draws still advancing
  for (std::size_t k = 0; k < G; ++k) {
    const std::size_t n = std::min(opt.draws[k], active);
    if (k == 0)
      for_each_block(n, [&](std::size_t r) {  // draw r reaches the largest grid M with r < draws[.]
        DrawState& s = state[r];
        std::size_t reach = 0;
        while (reach < G && r < opt.draws[reach]) ++reach;
        Rng rng(opt.seed, Stream::Prediction, opt.first_draw + r);
        s.w = e.draw_nested(opt.grid[reach - 1], rng, opt.sampler);
        s.run_max.set_size(Lx);
        s.run_max.fill(-kInf);
        causal_single ? s.acc_t.zeros(p.C.n_cols, Lx) : s.acc.zeros(Lx, p.C.n_cols);
        if (p.tv) s.Ahat.zeros(Lx, Y.n_cols);
      });
    // Every draw still advancing is at the previous grid point: the key sums of their new columns are computed
    // together, kWaveColumns columns at a time (memory), then each draw advances.
    const arma::uword B = opt.grid[k] - (k == 0 ? 0 : opt.grid[k - 1]);
    if (causal_single) {  // causal, single precision: chunks of draws side by side, in parallel
      const std::size_t per_chunk = std::max<std::size_t>(1, kCausalChunkColumns / B);
      for_each_block((n + per_chunk - 1) / per_chunk, [&](std::size_t c) {
        advance_causal_single(p, state, c * per_chunk, std::min(n, (c + 1) * per_chunk), opt.grid[k]);
      });
    }
    const bool alone = p.tv || !p.positions.is_empty();  // each draw forms its own key sums
    const std::size_t wave = alone ? n : std::max<std::size_t>(1, kWaveColumns / B);
    for (std::size_t r0 = 0; r0 < n; r0 += wave) {
      const std::size_t r1 = std::min(n, r0 + wave);
      std::vector<KeySums> ks;
      if (!alone) {
        std::vector<Draw> blocks(r1 - r0);
        for (std::size_t r = r0; r < r1; ++r) blocks[r - r0] = state[r].w.columns(state[r].m0, opt.grid[k]);
        ks = key_sums(p, blocks);
      }
      for_each_block(r1 - r0, [&](std::size_t i) {
        per[r0 + i] = advance(p, state[r0 + i], opt.grid[k], alone ? nullptr : &ks[i]);
      });
    }
    reduce(per, &RowErrors::sq, n, k, out.sq, out.sq_se);
    out.sq_sums.emplace_back();
    for (std::size_t r = 0; r < n; ++r) out.sq_sums.back().add(opt.first_draw + r, per[r].sq, per[r].c);
    if (values) reduce(per, &RowErrors::abs, n, k, out.abs, out.abs_se);
    if (p.tv) reduce(per, &RowErrors::tv, n, k, out.tv, out.tv_se);
    out.draws.push_back(n);
    if (!out.sq.col(k).is_finite() || (values && !out.abs.col(k).is_finite()) || (p.tv && !out.tv.col(k).is_finite()))
      throw NumericalError(
          fmt::format("the nested simulation of '{}' gave a non-finite error at M = {}", e.info().name, opt.grid[k]));
    if (opt.se_goal > 0 && opt.grid[k] >= opt.adapt_from) active = draws_needed(out.sq, out.sq_se, k, n, opt);
    if (k + 1 == G) break;
    if (next) {
      const std::size_t cap = next(out);
      if (cap == 0) break;
      active = std::min(active, std::max<std::size_t>(2, cap));
    }
    for (std::size_t r = std::min(opt.draws[k + 1], active); r < n; ++r) state[r] = DrawState{};  // done: free
  }
  return out;
}

}  // namespace kestrel
