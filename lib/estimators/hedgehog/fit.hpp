// Fitting a Hedgehog map to a head's softmax attention (Hedgehog section 4.1, eq. 4; issue 65 item 1): the
// cross-entropy between the softmax attention rows A_i and the map's rows A-hat_i,
//   L(W, b) = (1/N) sum_{training rows i} sum_j -A_ij log A-hat_ij,  A-hat_ij = S_ij / sum_j' S_ij',
//   S_ij = phi(q'_i)^T phi(k'_j),
// over the N training query rows of one head's training sequences (each row attends to its own sequence's keys, or,
// causal, to the keys up to its own position, both A_i and A-hat_i over those keys only),
// with a hand-written reverse-mode gradient, minimised by Ceres' L-BFGS (GradientProblemSolver, single-threaded;
// the objective runs its blocks of 256 query rows in parallel and sums them in block order: deterministic for any
// thread count). L = mean entropy of the rows A_i (constant) + mean KL(A_i || A-hat_i).
#pragma once
#include <string>
#include <vector>

#include <armadillo>

#include "estimators/hedgehog/hedgehog.hpp"

namespace kestrel {

// One sequence's training rows: the scaled points and the exact softmax rows they are fitted to.
struct AttentionRows {
  arma::mat Q;  // d x n: the training queries, scaled by d^-1/4
  arma::mat K;  // d x Lk: every key of the sequence, scaled by d^-1/4
  arma::mat A;  // n x Lk: softmax_j(q'_i^T k'_j), from the exact log-sum-exp
  // Causal (a decoder's mask): row i attends to keys 0..last_key[i] only, A_ij = 0 beyond, and A-hat_i is normalised
  // over those keys too. Empty: every key.
  arma::uvec last_key;
};

// The rows `rows` (column indices of Q; all when empty) of the attention of queries Q (d x Lq) over keys K (d x Lk),
// both unscaled as a model gives them (logits q^T k / sqrt(d)). causal: query column r sits at position r and attends
// to keys 0..r (needs as many keys as queries). Validates the points and the indices.
AttentionRows attention_rows(const arma::mat& Q, const arma::mat& K, const arma::uvec& rows = {}, bool causal = false);

// The objective L above over every sequence's rows (N = the total number of rows). With gradient, also dL/dW (P x d)
// and dL/db (P) in it. Stabilised: log S_ij = m_i + m_j + log sum_m exp(l_im - m_i) exp(l_jm - m_j), m the per-row
// max of the log-features (|W x + b|'s largest entry), so every sum has a term >= exp(-2 min(m_i, m_j)) and is
// finite while |W x + b| < 350 (beyond, the value is not finite and the line search steps back). Throws
// InvalidArgument for empty data or dimensions that differ from the map's.
double attention_cross_entropy(const HedgehogParams& p, const std::vector<AttentionRows>& data,
                               HedgehogParams* gradient = nullptr);

// The stop rule: Ceres' L-BFGS stops at the first of
//   `iterations` iterations; a relative decrease of L below function_tolerance in an iteration (|dL| / L);
//   max_k |dL/dtheta_k| below gradient_tolerance; a step below parameter_tolerance (relative to |theta|).
struct HedgehogFitOptions {
  arma::uword iterations = 100;
  double function_tolerance = 1e-9;
  double gradient_tolerance = 1e-9;
  double parameter_tolerance = 1e-12;
};

struct HedgehogFit {
  HedgehogParams params;
  double initial_objective = 0, final_objective = 0;
  arma::uword iterations = 0, evaluations = 0;
  std::string termination;  // Ceres' message
};

// Minimises attention_cross_entropy from init. Deterministic for any thread count (no clock in the stop rule).
HedgehogFit fit_hedgehog(const HedgehogParams& init, const std::vector<AttentionRows>& data,
                         const HedgehogFitOptions& opt = {});

}  // namespace kestrel
