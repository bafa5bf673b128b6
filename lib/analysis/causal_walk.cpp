// The causal walk of the nested-draw attention simulation in single precision: the prefix sums over the keys up to
// each row's position, in blocks of keys as chunked causal linear attention forms them, exact in the log domain.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "analysis/nested_state.hpp"
#include "core/logmath.hpp"
#include "core/vecmath.hpp"

namespace kestrel::nested {

namespace {

// Causal in single precision: the new columns of the draws [r0, r1) side by side (one chunk), walked over the keys in
// tiles of kKeyTile and, inside a tile, in blocks of kCausalBlock keys (CausalWalk). A block raises each column's
// scale a_m to its running maximum (the prefix sums so far shrink by e^(a_old - a_new)), its features are formed from
// the exponent form in single precision (<= 1 after the shift), and its sum E^T C is a single-precision product added
// to the prefix sums in double, as the bidirectional tiles are (rounding ~1e-6 of |Y-hat_i - Y_i|, tested against
// advance_causal). The block's rows take the prefix sums before it and the block's keys up to their positions.
// A form with groups (hrf-cluster) walks each key group's keys with that group's columns only (a key's features are
// 0 in the other groups' columns, so forming them would be wasted). Chunks are fixed by the draws and the block width,
// so the result does not depend on the thread count.
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

}  // namespace

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

}  // namespace kestrel::nested
