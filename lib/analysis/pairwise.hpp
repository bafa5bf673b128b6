// Exact single-feature variance of an estimator over all L_x x L_y pairs of two sets, streamed in
// fixed blocks (peak memory O(block^2), never L x L) and reduced in block order (thread-count
// independent). Pairs where the estimator is exact (Var = 0, log = -inf) are counted separately
// and left out of the means of logs, which would otherwise be -inf.
#pragma once
#include <cstdint>
#include <exception>
#include <vector>

#include "analysis/stats.hpp"
#include "estimators/estimator.hpp"

namespace kestrel {

struct PairwiseSummary {
  RunningStats log_var;         // log Var of one feature
  RunningStats log_rel_var;     // log(Var / K)
  RunningStats log_kernel;      // log K
  std::uint64_t n_exact = 0;    // pairs with Var = 0
  std::uint64_t n_flagged = 0;  // attention rows outside the delta method's range (analysis/attention_variance.hpp)
  void merge(const PairwiseSummary& o) {
    n_flagged += o.n_flagged;
    log_var.merge(o.log_var);
    log_rel_var.merge(o.log_rel_var);
    log_kernel.merge(o.log_kernel);
    n_exact += o.n_exact;
  }
};

// Variances are of the M-feature estimate (Estimator::log_var_over_k2_m).
PairwiseSummary summarize_exact_variance(const Estimator& e, const Kernel& k, const arma::mat& X, const arma::mat& Y,
                                         arma::uword block = 256, arma::uword M = 1);

// The same for several estimators (estimator i at Ms[i] features) over one pair of sets: each tile's Gram product
// and kernel are formed once for all of them. An estimator that throws on a tile gets the error of its first such
// tile in tile order and no summary; the others are not affected. Each summary has the bits of the one-estimator call.
struct SummaryOrError {
  PairwiseSummary summary;
  std::exception_ptr error;
};
std::vector<SummaryOrError> summarize_exact_variances(const std::vector<const Estimator*>& es, const Kernel& k,
                                                      const arma::mat& X, const arma::mat& Y, arma::uword block,
                                                      const std::vector<arma::uword>& Ms);

}  // namespace kestrel
