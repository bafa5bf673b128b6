// What the nested-draw attention simulation (nested_attention.cpp) shares between its draws and carries per draw, for
// its causal single-precision walk (causal_walk.cpp). Internal to those two files.
#pragma once
#include <vector>

#include <armadillo>

#include "analysis/key_tiles.hpp"
#include "estimators/estimator.hpp"

namespace kestrel::nested {

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

// Draws side by side in one chunk of the causal walk: at most this many new columns (or one draw).
constexpr arma::uword kCausalChunkColumns = 128;

// query_log_features transposed (B x Lx): per draw column, its log-features on every row.
arma::mat query_log_features_t(const Problem& p, const Draw& b);

// Causal in single precision: adds the columns [m0, m1) of the draws [r0, r1) to their sums (causal_walk.cpp).
void advance_causal_single(const Problem& p, std::vector<DrawState>& state, std::size_t r0, std::size_t r1,
                           arma::uword m1);

}  // namespace kestrel::nested
