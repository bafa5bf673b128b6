// Softmax attention and its random-feature approximation (CRT section 2.3, eq. 3; DERF section 2.2;
// DARK section 2): Y = diag(A 1)^-1 A V with A_ij = exp(q_i^T k_j / sqrt(d)) = K(q'_i, k'_j), the
// softmax kernel of q' = q / d^(1/4), k' = k / d^(1/4). Exact attention costs O(Lq Lk d); the
// approximation Y_hat = (P (S^T V)) ./ (P (S^T 1)), P = phi(Q'), S = phi(K') costs O((Lq + Lk) M d).
// Queries and keys are columns (d x L, the kestrel convention); values are rows, one per key (Lk x dv).
#pragma once
#include <memory>
#include <string>

#include <armadillo>

#include "estimators/estimator.hpp"

namespace kestrel {

// Checks Q (d x Lq), K (d x Lk), V (Lk x dv): non-empty, finite, matching sizes; names the bad value.
void validate_attention(const arma::mat& Q, const arma::mat& K, const arma::mat& V);

// q / d^(1/4): the points whose softmax kernel is the attention matrix.
arma::mat attention_scaled(const arma::mat& X);

struct ExactAttention {
  arma::mat Y;               // Lq x dv
  arma::vec log_normaliser;  // log (A 1)_i, Lq
};

// Exact attention, streaming over blocks of `block` keys with a running row max and log-sum-exp
// (the numerically stable "online softmax"): never forms more than block x block logits at a time, so
// memory is O(L d) for any L, and logits of any size (e^800) are fine. Parallel over fixed blocks of
// queries: identical results for any thread count.
ExactAttention exact_attention(const arma::mat& Q, const arma::mat& K, const arma::mat& V, arma::uword block = 256);

struct AttentionOptions {
  // Positive estimators: exponentiate log-features minus a per-query-row max (query side) and minus
  // one global max (key side). Both factors cancel in the row ratio, so Y_hat is unchanged where the
  // unstabilised computation is finite, and stays finite where exp(log-feature) over- or underflows.
  // Not positive estimators (trig, hybrids) have no log-features and are never rescaled.
  bool stabilise = true;
};

// The estimates with their row scales: the estimate of (A V)_i is numerator.row(i) exp(log_scale_i),
// that of (A 1)_i is normaliser(i) exp(log_scale_i) (log_scale = 0 without stabilisation).
struct ApproxAttention {
  arma::mat Y;           // Lq x dv
  arma::mat numerator;   // Lq x dv
  arma::vec normaliser;  // Lq; can be <= 0 for estimators that are not positive
  arma::vec log_scale;   // Lq
};

// Fits estimator `name` on the scaled points (Q', K') with the registry's fitting.
std::unique_ptr<Estimator> fit_attention_estimator(const std::string& name, const arma::mat& Q, const arma::mat& K);

// Random-feature attention from one draw of an estimator fitted on (Q', K'). Throws NumericalError if
// a normaliser is 0 or any output is not finite (a zero normaliser of a trig estimator, or overflow
// without the stabiliser).
ApproxAttention approximate_attention(const FeatureMap& e, const Draw& w, const arma::mat& Q, const arma::mat& K,
                                      const arma::mat& V, const AttentionOptions& opt = {});

// Causal attention (a decoder's mask): query column r attends to keys 0..positions(r) only (positions count from 0,
// any order). Exact: exact_attention of each query over its keys. Random-feature: the same draw's features as
// approximate_attention, with the key sums S^T [V, 1] formed as prefix sums over the keys in order (Performer's
// unidirectional mode), so it costs O((Lq + Lk) M dv) like the bidirectional one.
ExactAttention exact_causal_attention(const arma::mat& Q, const arma::uvec& positions, const arma::mat& K,
                                      const arma::mat& V);
ApproxAttention approximate_causal_attention(const FeatureMap& e, const Draw& w, const arma::mat& Q,
                                             const arma::uvec& positions, const arma::mat& K, const arma::mat& V,
                                             const AttentionOptions& opt = {});

// ||Y_hat - Y||_F / ||Y||_F.
double relative_error(const arma::mat& approx, const arma::mat& exact);
// ||D_hat - D||_2 / ||D||_2 for the row normalisers D = A 1, computed relative to max_i D_i so that
// normalisers of e^800 are fine.
double normaliser_relative_error(const ApproxAttention& approx, const ExactAttention& exact);

}  // namespace kestrel
