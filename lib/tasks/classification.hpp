// Non-parametric (Nadaraya-Watson) kernel classification with the Gaussian kernel (CRT 5.2, DERF 5.2):
// class scores r*_c(u*) = sum_i K(sigma u*, sigma u_i) [label_i = c], prediction argmax_c r*_c. The
// normaliser is dropped (it does not change the argmax), so non-positive estimators can be used too.
// Exact scores cost O(n L d) per batch of n test points; random-feature scores P(test) (S(train)^T R)
// cost O(L M) once and O(M) per test point and class.
#pragma once
#include <armadillo>

#include "estimators/estimator.hpp"

namespace kestrel {

// Checks labels < n_classes, n_classes > 0, matching sizes and finite points; names the bad value.
void validate_labeled(const arma::mat& train, const arma::uvec& labels, arma::uword n_classes);

// log r*_c for every class c (rows) and test point (columns): a log-sum-exp per class, so scores of
// e^-700 are still ranked correctly. -inf for a class with no training point.
arma::mat nw_log_scores_exact(const arma::mat& train, const arma::uvec& labels, arma::uword n_classes,
                              const arma::mat& test, double sigma);

// Unbiased random-feature estimate of r*_c (n_classes x n_test) from one draw of an estimator fitted
// on sigma-scaled points: P(sigma test) (S(sigma train)^T R), R the one-hot label matrix.
arma::mat nw_scores_rf(const Estimator& e, const Draw& w, const arma::mat& train, const arma::uvec& labels,
                       arma::uword n_classes, const arma::mat& test, double sigma);

arma::uvec argmax_rows_per_column(const arma::mat& scores);  // predicted class per test point
double accuracy(const arma::uvec& predicted, const arma::uvec& truth);

}  // namespace kestrel
