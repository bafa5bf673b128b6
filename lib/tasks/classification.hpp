// Non-parametric (Nadaraya-Watson) kernel classification with the Gaussian kernel (CRT 5.2, DERF 5.2):
// class scores r*_c(u*) = sum_i K(sigma u*, sigma u_i) [label_i = c], prediction argmax_c r*_c. The
// normaliser is dropped (it does not change the argmax), so non-positive estimators can be used too.
// Exact scores cost O(n L d) per batch of n test points; random-feature scores P(test) (S(train)^T R)
// cost O(L M) once and O(M) per test point and class.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <armadillo>

#include "core/rng.hpp"
#include "data/uci.hpp"
#include "estimators/estimator.hpp"
#include "sampling/omega.hpp"

namespace kestrel {

// Checks labels < n_classes, n_classes > 0, matching sizes and finite points; names the bad value.
void validate_labeled(const arma::mat& train, const arma::uvec& labels, arma::uword n_classes);

// log r*_c for every class c (rows) and test point (columns): a log-sum-exp per class, so scores of
// e^-700 are still ranked correctly. -inf for a class with no training point.
arma::mat nw_log_scores_exact(const arma::mat& train, const arma::uvec& labels, arma::uword n_classes,
                              const arma::mat& test, double sigma);

// Unbiased random-feature estimate of r*_c (n_classes x n_test) from one draw of an estimator fitted
// on sigma-scaled points: P(sigma test) (S(sigma train)^T R), R the one-hot label matrix.
arma::mat nw_scores_rf(const FeatureMap& e, const Draw& w, const arma::mat& train, const arma::uvec& labels,
                       arma::uword n_classes, const arma::mat& test, double sigma);

// Predicted classes argmax_c r*_c from one draw, with the stabiliser of lib/tasks/attention.hpp for positive
// estimators: log-features, each query row shifted by its maximum and all key rows by one global maximum before
// exponentiating. The scores change by a positive factor per query, the argmax does not, and nothing overflows (ADERF
// at sigma = 100 has log-features near 10^5). Non-positive estimators use features with a row scale (the Gaussian
// factor inside the exponent) and throw NumericalError if their features still overflow. `all_zero` (optional) receives
// the number of queries whose scores are all 0 (no signal: argmax picks class 0).
arma::uvec nw_predict_rf(const FeatureMap& e, const Draw& w, const arma::mat& train, const arma::uvec& labels,
                         arma::uword n_classes, const arma::mat& test, double sigma, arma::uword* all_zero = nullptr);

arma::uvec argmax_rows_per_column(const arma::mat& scores);  // predicted class per test point
double accuracy(const arma::uvec& predicted, const arma::uvec& truth);

// ---- The papers' protocol (CRT 9.10.2, DERF B.3) ----------------------------------------------------------------

// A labelled data set cut into train / validation / test parts (points are columns).
struct LabeledSplit {
  arma::mat train, validation, test;
  arma::uvec train_labels, validation_labels, test_labels;
  arma::uword n_classes = 0;
};
void validate_split(const LabeledSplit& s);

// The fixed random 90% / 5% / 5% split of a UCI classification set (split_90_5_5 with this seed), standardised with
// the mean and scale of the training part.
LabeledSplit split_standardized(const UciData& d, std::uint64_t seed);

struct NwOptions {
  std::vector<double> sigmas = default_sigmas();  // tuned on the validation part
  std::size_t seeds = 50;                         // feature draws per sigma (validation) and at the best sigma (test)
  arma::uword M = 128;                            // real feature columns; complex estimators draw M / 2 omegas
  Sampler sampler = Sampler::Orthogonal;          // Gaussian omegas (discrete families ignore it)
  std::uint64_t seed = kDefaultSeed;
  static std::vector<double> default_sigmas();  // 10 log-uniform values in [1e-2, 1e2]
};

// Accuracies of one method under the protocol: sigma maximises the mean validation accuracy over the seeds (the
// smallest such sigma on ties), then the test accuracy is measured for every seed at that sigma.
struct NwResult {
  std::string method;
  arma::uword M = 0, omegas = 0;  // feature columns and random omegas per draw (0 for exact)
  arma::vec sigmas;
  arma::mat validation_accuracy;  // seeds x sigmas
  arma::vec no_signal;            // per sigma: fraction of validation predictions whose scores were all 0
  arma::vec overflow;             // per sigma: fraction of validation draws whose features overflowed (accuracy 0)
  arma::uword best = 0;           // index into sigmas
  arma::vec test_accuracy;        // per seed, at sigmas(best)
  double test_mean() const { return arma::mean(test_accuracy); }
  double test_std() const;  // population standard deviation over seeds (0 for one seed)
};

// Fits the named estimator for queries Q against training points T (both already scaled by sigma). PoisRF+/GeomRF+
// take their shift from T alone (CRT 9.10.2: no test data leaks into c; queries below it are clamped).
std::unique_ptr<Estimator> fit_for_classification(const std::string& name, const arma::mat& Q, const arma::mat& T);

NwResult nw_protocol_exact(const LabeledSplit& s, const NwOptions& o);
// Deterministic in o.seed for any thread count: draw (sigma k, seed r) uses stream (Features, 2 (k seeds + r)) for
// validation and 2 (k seeds + r) + 1 for test.
NwResult nw_protocol_rf(const std::string& estimator, const LabeledSplit& s, const NwOptions& o);

}  // namespace kestrel
