// Nested-draw simulation of random-feature attention rows (see nested_attention.hpp).
#include "analysis/nested_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>

#include "analysis/key_tiles.hpp"
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
  arma::mat acc_t;  // causal in single precision: acc transposed (n x Lx, acc left empty): a row's sums contiguous
};

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

// The keys of one group of a form with groups (a key's features are 0 outside its group's columns), or every key
// (kAllGroups), gathered in order: their exponent points, rows and C^T in single precision (keys as columns), and per
// query row how many of them are at or before its position.
struct KeyGroup {
  arma::uword id = 0;
  arma::fmat Zk, Ctf;
  arma::frowvec row_k;
  arma::uvec upto;
};

// What every draw shares: the points, C = [V, 1] (or 1), the exact rows and normalisers, the exact attention matrix,
// the key tiles of the single-precision key sums, and for maps with an exponent form the queries' exponent points
// and rows.
struct Problem {
  const FeatureMap& e;
  const arma::mat &X, &Y, &V, &Yexact;
  const arma::vec& log_norm;
  arma::mat C, A;
  bool tv;
  bool form = false;
  std::vector<KeyTile> tiles;
  arma::mat Zq;  // d' x Lx
  arma::vec row_q;
  arma::uvec group_q;           // the queries' groups, for a form with groups
  arma::uvec positions, order;  // causal: each row's last key, and the rows in ascending position (stable)
  arma::mat Ct;                 // causal in double: C^T (n x keys), a segment of keys one contiguous block
  // Causal in single precision (a map with an exponent form): the keys up to the last position by key group.
  std::vector<KeyGroup> key_groups;
  arma::mat Yexact_t;  // Yexact^T (dv x Lx): the errors of rows held as acc_t
};

constexpr arma::uword kAllGroups = ~arma::uword{0};

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

// Causal in single precision: the new columns of the draws [r0, r1) side by side (one chunk), walked over the keys in
// tiles of kKeyTile and, inside a tile, in blocks of kCausalBlock keys (CausalWalk). A block raises each column's
// scale a_m to its running maximum (the prefix sums so far shrink by e^(a_old - a_new)), its features are formed from
// the exponent form in single precision (<= 1 after the shift), and its sum E^T C is a single-precision product added
// to the prefix sums in double, as the bidirectional tiles are (rounding ~1e-6 of |Y-hat_i - Y_i|, tested against
// advance_causal). The block's rows take the prefix sums before it and the block's keys up to their positions.
// A form with groups (hrf-cluster) walks each key group's keys with that group's columns only (a key's features are
// 0 in the other groups' columns, so forming them would be wasted). Chunks are fixed by the draws and the block width,
// so the result does not depend on the thread count.
constexpr arma::uword kCausalChunkColumns = 128;

// The columns of draws [r0, r1) in one key group (kAllGroups: all of them) side by side: per draw its first column
// and its columns' query log-features (B x Lx), the projections (W x d', single precision) and constant exponents.
struct ChunkColumns {
  std::vector<arma::mat> T;
  std::vector<arma::uword> at;  // at.back() = W
  arma::fmat Pt;
  arma::vec col;
  // A form with query groups: per draw, where each query group's columns start (ordered by query group; nq + 1
  // entries), since a row's features are 0 outside its query group's columns. Empty without query groups.
  std::vector<std::vector<arma::uword>> q_at;
};

ChunkColumns chunk_columns(const std::vector<ExponentForm>& forms, const std::vector<arma::mat>& Tq,
                           const std::vector<arma::uvec>& q_group, arma::uword nq, arma::uword id) {
  ChunkColumns c;
  arma::mat P;  // d' x W
  for (std::size_t r = 0; r < forms.size(); ++r) {
    const ExponentForm& f = forms[r];
    arma::uvec sel =
        id == kAllGroups ? arma::regspace<arma::uvec>(0, f.P.n_cols - 1) : arma::find(f.group == id).eval();
    if (nq) {  // by query group, each group's columns in their order
      const arma::uvec g = q_group[r](sel);
      sel = sel(arma::stable_sort_index(g)).eval();
      std::vector<arma::uword> starts(nq + 1, 0);
      for (arma::uword v : g) ++starts[v + 1];
      for (arma::uword k = 0; k < nq; ++k) starts[k + 1] += starts[k];
      c.q_at.push_back(std::move(starts));
    }
    c.at.push_back(P.n_cols);
    P = arma::join_rows(P, f.P.cols(sel));
    c.col = arma::join_cols(c.col, arma::vec(f.col.cols(sel).t()));
    c.T.push_back(Tq[r].rows(sel));
  }
  c.at.push_back(P.n_cols);
  c.Pt = arma::conv_to<arma::fmat>::from(P.t());
  return c;
}

// Keys per block of the walk: a block's rows take the keys before it from the prefix sums (a matrix product per draw)
// and the block's own keys up to their positions from a masked block product (single precision), as chunked linear
// attention does. The block's columns are scaled by their maximum over the block, s_m; a row at position j weighs
// them by e^(t_im + s_m - m_i) <= e^(s_m - a_m(j)), so while s_m - a_m(j) <= kBlockGap (nats) at the block's first row
// the single-precision factors stay in range (<= e^60) and every term the row's largest one does not dwarf by far
// more than single precision resolves keeps its bits. A block beyond the gap (a key far above every earlier one, at
// the start of the walk) is walked key by key instead. Fixed sizes: the result does not depend on the thread count.
constexpr arma::uword kCausalBlock = 64;
constexpr double kBlockGap = 60.0;

// The walk of one key group's keys (g) with its columns (cc) of draws [r0, r1): see advance_causal_single.
class CausalWalk {
 public:
  CausalWalk(const Problem& p, std::vector<DrawState>& state, std::size_t r0, std::size_t r1, const ChunkColumns& cc,
             const KeyGroup& g)
      : p_(p),
        state_(state),
        r0_(r0),
        r1_(r1),
        cc_(cc),
        g_(g),
        W_(cc.Pt.n_rows),
        n_(p.C.n_cols),
        a_(W_, arma::fill::value(-kInf)),
        St_(n_, W_, arma::fill::zeros),
        t_(W_) {}

  void run() {
    const arma::uword end = g_.Zk.n_cols;                                // the group's keys up to the last position
    std::size_t idx = 0;                                                 // the next row in position order
    while (idx < p_.order.n_elem && g_.upto(p_.order(idx)) == 0) ++idx;  // no key of the group yet: features 0
    for (arma::uword t0 = 0; t0 < end; t0 += kKeyTile) {
      const arma::uword t1 = std::min(end, t0 + kKeyTile);
      E_ = cc_.Pt * arma::fmat(const_cast<float*>(g_.Zk.colptr(t0)), g_.Zk.n_rows, t1 - t0, false, true);  // no copy
      E_.each_row() += g_.row_k.cols(t0, t1 - 1);
      for (arma::uword b0 = t0; b0 < t1; b0 += kCausalBlock) {
        const arma::uword b1 = std::min(t1, b0 + kCausalBlock);
        const std::size_t first = idx;
        while (idx < p_.order.n_elem && g_.upto(p_.order(idx)) <= b1) ++idx;
        block(t0, b0, b1, first, idx);
      }
    }
  }

 private:
  // The keys b0..b1-1 (of the tile at t0) with the rows order[first, last) whose positions are among them.
  void block(arma::uword t0, arma::uword b0, arma::uword b1, std::size_t first, std::size_t last) {
    if (first == last) {
      raise(t0, b0, b1 - 1);
      accumulate(t0, b0, b1 - 1);
      return;
    }
    if (!prefix_maxima(t0, b0, b1, first, last)) {  // key by key
      arma::uword next = b0;
      for (std::size_t idx = first; idx < last; ++idx) {
        const arma::uword i = p_.order(idx), pos = g_.upto(i) - 1;
        if (pos >= next) {
          raise(t0, next, pos);
          accumulate(t0, next, pos);
          next = pos + 1;
        }
        for (std::size_t r = r0_; r < r1_; ++r) row(r, i);
      }
      if (next < b1) {
        raise(t0, next, b1 - 1);
        accumulate(t0, next, b1 - 1);
      }
      return;
    }
    raise(t0, b0, b1 - 1);
    Stf_ = arma::conv_to<arma::fmat>::from(St_);
    for (std::size_t r = r0_; r < r1_; ++r) rows(r, t0, b0, b1, first, last);
    accumulate(t0, b0, b1 - 1);
  }

  // The draw's columns that row i uses: its first column and their number.
  std::pair<arma::uword, arma::uword> columns(std::size_t r, arma::uword i) const {
    arma::uword c0 = cc_.at[r - r0_], B = cc_.at[r - r0_ + 1] - c0;
    if (!cc_.q_at.empty()) {  // only the row's query group's columns (its features are 0 in the others)
      const std::vector<arma::uword>& qa = cc_.q_at[r - r0_];
      c0 += qa[p_.group_q(i)], B = qa[p_.group_q(i) + 1] - qa[p_.group_q(i)];
    }
    return {c0, B};
  }

  // Each column's maximum over the prefix up to each row of the block (Pm_, W x rows) and over the block (s_);
  // false when the gap between them at the block's first row exceeds kBlockGap.
  bool prefix_maxima(arma::uword t0, arma::uword b0, arma::uword b1, std::size_t first, std::size_t last) {
    Pm_.set_size(W_, last - first);
    arma::fvec run(W_, arma::fill::value(-std::numeric_limits<float>::infinity()));
    std::size_t idx = first;
    for (arma::uword j = b0; j < b1; ++j) {
      const float* e = E_.colptr(j - t0);
      for (arma::uword w = 0; w < W_; ++w) run[w] = std::max(run[w], e[w]);
      for (; idx < last && g_.upto(p_.order(idx)) - 1 == j; ++idx)
        for (arma::uword w = 0; w < W_; ++w)
          Pm_(w, idx - first) = std::max(a_[w], static_cast<double>(run[w]) + cc_.col[w]);
    }
    s_.set_size(W_);
    double gap = 0;
    for (arma::uword w = 0; w < W_; ++w) {
      s_[w] = std::max(a_[w], static_cast<double>(run[w]) + cc_.col[w]);
      gap = std::max(gap, s_[w] - Pm_(w, 0));
    }
    return gap <= kBlockGap;
  }

  // Keys j0..j1 (of the tile at t0) join the scale: each column's scale a_m rises to their maximum (its sums so far
  // shrink by e^(a_old - a_new); they are 0 while a = -inf), and their features are formed in place in E_ from the
  // exponent form in single precision (<= 1 after the shift).
  void raise(arma::uword t0, arma::uword j0, arma::uword j1) {
    const arma::uword len = j1 - j0 + 1;
    float* e = E_.colptr(j0 - t0);
    arma::fvec mx(e, W_), shift(W_);
    for (arma::uword j = 1; j < len; ++j)
      for (arma::uword w = 0; w < W_; ++w) mx[w] = std::max(mx[w], e[j * W_ + w]);
    for (arma::uword w = 0; w < W_; ++w) {
      const double top = static_cast<double>(mx[w]) + cc_.col[w];
      if (top > a_[w]) {
        St_.col(w) *= std::exp(a_[w] - top);
        a_[w] = top;
      }
      shift[w] = a_[w] == -kInf ? 0.0f : static_cast<float>(a_[w] - cc_.col[w]);
    }
    for (arma::uword j = 0; j < len; ++j)
      for (arma::uword w = 0; w < W_; ++w) e[j * W_ + w] -= shift[w];
    simd::exp_shifted(e, W_ * len, 0.0f);
  }

  // Keys j0..j1, raised, join the prefix sums: their sum E^T C is a single-precision product added in double.
  void accumulate(arma::uword t0, arma::uword j0, arma::uword j1) {
    const arma::uword len = j1 - j0 + 1;
    const arma::fmat Es(E_.colptr(j0 - t0), W_, len, false, true);
    const arma::fmat Cs(const_cast<float*>(g_.Ctf.colptr(j0)), n_, len, false, true);
    Sf_ = Cs * Es.t();  // n x W
    double* sd = St_.memptr();
    const float* sf = Sf_.memptr();
    for (arma::uword k = 0; k < n_ * W_; ++k) sd[k] += static_cast<double>(sf[k]);
  }

  // Row i of draw r with the prefix sums as they stand (key by key).
  void row(std::size_t r, arma::uword i) {
    DrawState& s = state_[r];
    const auto [c0, B] = columns(r, i);
    const double* q = cc_.T[r - r0_].colptr(i) + (c0 - cc_.at[r - r0_]);
    double m = s.run_max(i);
    for (arma::uword b = 0; b < B; ++b) m = std::max(m, t_[b] = q[b] + a_[c0 + b]);
    if (m == -kInf) return;  // no feature of the row is nonzero yet (a form with query groups)
    for (arma::uword b = 0; b < B; ++b) t_[b] -= m;
    simd::exp_libm(t_.memptr(), B);
    const double shrink = std::exp(s.run_max(i) - m);  // 0 at the first block
    y_ = arma::mat(St_.colptr(c0), n_, B, false, true) * arma::vec(t_.memptr(), B, false, true);
    double* out = s.acc_t.colptr(i);
    for (arma::uword c = 0; c < n_; ++c) out[c] = out[c] * shrink + y_[c];
    s.run_max(i) = m;
  }

  // The rows order[first, last) of draw r at once: the prefix before the block (scale s_, the block's keys not yet in
  // it) weighed by the rows' factors e^(t_im + s_m - m_i), plus the block's keys up to each row's position.
  void rows(std::size_t r, arma::uword t0, arma::uword b0, arma::uword b1, std::size_t first, std::size_t last) {
    DrawState& s = state_[r];
    const arma::uword D0 = cc_.at[r - r0_], D = cc_.at[r - r0_ + 1] - D0, R = last - first;
    if (D == 0) return;
    const arma::uword K = b1 - b0;
    arma::mat Qf(D, R, arma::fill::zeros);
    arma::vec m(R);
    for (arma::uword k = 0; k < R; ++k) {
      const arma::uword i = p_.order(first + k);
      const auto [c0, B] = columns(r, i);
      const double* q = cc_.T[r - r0_].colptr(i) + (c0 - D0);
      m[k] = s.run_max(i);
      for (arma::uword b = 0; b < B; ++b) m[k] = std::max(m[k], q[b] + Pm_(c0 + b, k));
      if (m[k] == -kInf) continue;
      double* f = Qf.colptr(k) + (c0 - D0);
      for (arma::uword b = 0; b < B; ++b) f[b] = q[b] + s_[c0 + b] - m[k];
      simd::exp_libm(f, B);
    }
    // One single-precision product [S~ C_block] [F; A] (n x R): F the rows' factors on the draw's columns, A (K x R)
    // the block's keys' weights for each row, 0 beyond its position.
    arma::fmat F(D + K, R);
    F.head_rows(D) = arma::conv_to<arma::fmat>::from(Qf);
    F.tail_rows(K) = E_.submat(D0, b0 - t0, D0 + D - 1, b1 - 1 - t0).t() * F.head_rows(D);
    for (arma::uword k = 0; k < R; ++k) {  // each row sees the block's keys up to its position
      const arma::uword rel = g_.upto(p_.order(first + k)) - b0;
      if (rel < K) F.col(k).tail(K - rel).zeros();
    }
    const arma::fmat Y = arma::join_rows(Stf_.cols(D0, D0 + D - 1),
                                         arma::fmat(const_cast<float*>(g_.Ctf.colptr(b0)), n_, K, false, true)) *
                         F;
    for (arma::uword k = 0; k < R; ++k) {
      const arma::uword i = p_.order(first + k);
      if (m[k] == -kInf) continue;
      const double shrink = std::exp(s.run_max(i) - m[k]);  // 0 at the first block
      double* out = s.acc_t.colptr(i);
      for (arma::uword c = 0; c < n_; ++c) out[c] = out[c] * shrink + static_cast<double>(Y(c, k));
      s.run_max(i) = m[k];
    }
  }

  const Problem& p_;
  std::vector<DrawState>& state_;
  const std::size_t r0_, r1_;
  const ChunkColumns& cc_;
  const KeyGroup& g_;
  const arma::uword W_, n_;
  arma::vec a_;              // each column's scale: its largest exponent over the keys in the prefix sums
  arma::mat St_;             // the prefix sums on the scale a_, transposed (n x W): a draw's columns contiguous
  arma::fmat E_, Sf_, Stf_;  // Stf_: St_ in single precision for a block's rows
  arma::mat Pm_;  // per row of a block: each column's largest exponent over the keys up to the row's position
  arma::vec s_, t_, y_;
};

void advance_causal_single(const Problem& p, std::vector<DrawState>& state, std::size_t r0, std::size_t r1,
                           arma::uword m1) {
  std::vector<ExponentForm> forms;
  std::vector<arma::mat> Tq;        // per draw: its block's query log-features, B x Lx
  std::vector<arma::uvec> q_group;  // per draw: its columns' query groups (a form with groups)
  arma::uword nq = p.group_q.is_empty() ? 0 : p.group_q.max() + 1;  // query groups (rows' and columns')
  for (std::size_t r = r0; r < r1; ++r) {
    const Draw b = state[r].w.columns(state[r].m0, m1);
    forms.push_back(*p.e.exponent_form(b, Side::Key));
    Tq.push_back(query_log_features_t(p, b));
    if (nq) q_group.push_back(p.e.exponent_form(b, Side::Query)->group);
    if (nq) nq = std::max(nq, q_group.back().max() + 1);
  }
  for (const KeyGroup& g : p.key_groups) {
    const ChunkColumns cc = chunk_columns(forms, Tq, q_group, nq, g.id);
    if (cc.at.back() > 0 && g.Zk.n_cols > 0) CausalWalk(p, state, r0, r1, cc, g).run();
  }
  for (std::size_t r = r0; r < r1; ++r) state[r].m0 = m1;
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
