// Simulated error of random-feature attention rows at every M of a grid from nested draws (`kestrel advise`'s
// prediction): draw r is one nested draw of M_r features (FeatureMap::draw_nested), and its first M columns are a draw
// of M features for every grid M <= M_r, so R draws give R independent samples of the error at every grid M for the
// price of R draws at the largest M. The draws advance together one grid point at a time, so a caller's rule, asked
// after each grid point, ends the simulation where the answer is settled (advise: a few doublings beyond the M for its
// target) or cuts the draws that continue, and the larger M are never paid for. Y-hat_i = (P (S^T V))_i / (P (S^T 1))_i
// (CRT eq. 3) is accumulated over blocks of features in log domain: each key feature carries its own scale a_m = max_j
// log f2(w_m, k_j), and each query row a running maximum of log f1(w_m, q_i) + a_m (the online-softmax rescaling), so
// e^800 features and prefixes whose features are all tiny stay exact. The key sums S~^T C run over tiles of 1024 keys
// (memory a tile, not Lk x M, so L = 131072 fits) with features, the projection of maps with an exponent form
// (estimator.hpp), its exponent rows, the exp and each tile's sum in single precision, tiles added in double: twice
// to four times the speed of double on AVX-512, at a rounding of about 1e-6 of |Y-hat_i - Y_i| (bounded and tested
// against the double path, which the total-variation error still takes). The key sums of every draw at a grid point
// are computed together, in chunks of 128 feature columns by groups of 8 key tiles (one matrix product per tile for
// many draws, both cores busy at any L), which halves the time at L = 32768. Positive feature maps only (the row
// normaliser of other maps can be 0). Checked against independent draws at each M (tests/nested_attention_test.cpp) and
// against a NumPy simulation written from the definitions (python/tests/test_advise_independent.py).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include <armadillo>

#include "analysis/control_variate.hpp"
#include "estimators/estimator.hpp"
#include "sampling/omega.hpp"

namespace kestrel {

struct NestedOptions {
  std::vector<arma::uword> grid;   // ascending feature counts, >= 1
  std::vector<std::size_t> draws;  // draws at each grid M, non-increasing, >= 2: draw r reaches the largest grid M
                                   // with r < draws[k]
  std::uint64_t seed = 0;          // draw r from the stream (seed, Prediction, first_draw + r)
  Sampler sampler = Sampler::Iid;
  bool total_variation = false;  // also the total-variation error of the attention rows (rows x Lk work per feature)
  // Fewer draws where they are not needed: after each grid M >= adapt_from, the draws that continue are cut to
  // n (rse / se_goal)^2 (at least min_draws), rse the 95th percentile over rows of the relative standard error of the
  // row's mean squared error from the n draws so far. 0: the draws above, unchanged.
  double se_goal = 0;
  arma::uword adapt_from = 0;
  std::size_t min_draws = 2;
  std::uint64_t first_draw = 0;  // a further run of fresh draws continues where an earlier one ended
  // Causal attention (empty: every row attends to every key): row i attends to keys 0..positions[i] only. The key sums
  // are prefix sums, as causal random-feature attention forms them (Performer's unidirectional mode): the keys are
  // walked in order in segments between the rows' positions, each segment summed with its own per-feature scale and
  // merged into the running prefix (the larger scale wins), so the log-domain stabilisation stays exact. For maps with
  // an exponent form the draws' columns are walked together and each segment's features and sum are
  // single precision, added in double, as the bidirectional tiles; otherwise each draw alone in double. Not with
  // total_variation.
  arma::uvec positions{};
  bool double_precision = false;  // causal: every map in double (the reference the single-precision path is tested on)
};

// Per sampled row (rows) and grid M (columns): the mean over the draws at that M and its standard error. Columns exist
// for the grid points reached (all, unless a stop rule ended the simulation earlier).
struct NestedErrors {
  arma::mat sq, sq_se;    // with values: |Y-hat_i - Y_i|^2; without: (D-hat_i / D_i - 1)^2 of the normaliser D = K 1
  arma::mat abs, abs_se;  // with values: mean_a |Y-hat_ia - Y_ia|
  arma::mat tv, tv_se;    // when asked: (1/2) sum_j |A-hat_ij - A_ij|, A = diag(K 1)^-1 K
  std::vector<std::size_t> draws;  // the draws behind each column
  // Per column: the sums behind sq with the control variate c = D-hat_i / D_i - 1 (mean exactly 0), by draw index
  // (analysis/control_variate.hpp); sums of further runs (first_draw) add to them.
  std::vector<ControlVariateSums> sq_sums;
};

// X: d x Lx kernel query points, Y: d x Ly kernel keys (softmax kernel exp(x^T y); attention's q / d^(1/4)), V: Ly x dv
// values or empty (then the normalisers), Yexact: Lx x dv exact output rows (empty without V), log_norm: log (K 1)_i.
// Identical for any thread count (each draw is computed alone, then summed in order). InvalidArgument for maps that
// are not positive, Undefined (core/error.hpp) for maps whose draws do not nest.
// `next`, when given, is asked after each grid point but the last with the errors so far (columns 0..k) and returns
// how many draws at most continue to the next grid point: 0 ends the simulation there, kKeepDraws leaves the draws as
// opt says, n >= 1 keeps the first max(2, n) of them (the caller's own rule: advise cuts the draws of a row whose
// error is far above its target). The columns computed so far do not depend on it.
inline constexpr std::size_t kKeepDraws = ~std::size_t{0};
NestedErrors simulate_nested(const FeatureMap& e, const arma::mat& X, const arma::mat& Y, const arma::mat& V,
                             const arma::mat& Yexact, const arma::vec& log_norm, const NestedOptions& opt,
                             const std::function<std::size_t(const NestedErrors&)>& next = {});

}  // namespace kestrel
