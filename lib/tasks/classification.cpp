// Nadaraya-Watson kernel classification, exact and with random features (see classification.hpp).
#include "tasks/classification.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/logmath.hpp"
#include "kernels/kernel.hpp"

namespace kestrel {

void validate_labeled(const arma::mat& train, const arma::uvec& labels, arma::uword n_classes) {
  validate_points(train, "training set");
  require(n_classes > 0, "number of classes must be > 0, got 0");
  require(labels.n_elem == train.n_cols, "{} labels for {} training points", labels.n_elem, train.n_cols);
  require(labels.max() < n_classes, "label {} is not below the number of classes {}", labels.max(), n_classes);
}

namespace {
void validate_task(const arma::mat& train, const arma::uvec& labels, arma::uword n_classes, const arma::mat& test,
                   double sigma) {
  validate_labeled(train, labels, n_classes);
  validate_points(test, "test set");
  require(test.n_rows == train.n_rows, "test points have d = {}, training points d = {}", test.n_rows, train.n_rows);
  require(std::isfinite(sigma) && sigma > 0, "sigma must be > 0, got {}", sigma);
}
}  // namespace

arma::mat nw_log_scores_exact(const arma::mat& train, const arma::uvec& labels, arma::uword n_classes,
                              const arma::mat& test, double sigma) {
  validate_task(train, labels, n_classes, test, sigma);
  const arma::mat lk = log_kernel(Kernel::gaussian(), sigma * test, sigma * train);  // n_test x L
  arma::mat out(n_classes, test.n_cols, arma::fill::value(-kInf));
  for (arma::uword t = 0; t < test.n_cols; ++t) {
    arma::vec mx(n_classes, arma::fill::value(-kInf));
    for (arma::uword i = 0; i < train.n_cols; ++i) mx(labels(i)) = std::max(mx(labels(i)), lk(t, i));
    arma::vec acc(n_classes, arma::fill::zeros);
    for (arma::uword i = 0; i < train.n_cols; ++i) acc(labels(i)) += std::exp(lk(t, i) - mx(labels(i)));
    for (arma::uword c = 0; c < n_classes; ++c)
      if (mx(c) > -kInf) out(c, t) = mx(c) + std::log(acc(c));
  }
  return out;
}

arma::mat nw_scores_rf(const Estimator& e, const Draw& w, const arma::mat& train, const arma::uvec& labels,
                       arma::uword n_classes, const arma::mat& test, double sigma) {
  validate_task(train, labels, n_classes, test, sigma);
  arma::mat R(train.n_cols, n_classes, arma::fill::zeros);
  for (arma::uword i = 0; i < train.n_cols; ++i) R(i, labels(i)) = 1.0;
  return approximate_kernel_times(e, w, sigma * test, sigma * train, R, Kernel::gaussian()).t();
}

arma::uvec argmax_rows_per_column(const arma::mat& scores) { return arma::index_max(scores, 0).t(); }

double accuracy(const arma::uvec& predicted, const arma::uvec& truth) {
  require(predicted.n_elem == truth.n_elem && !truth.is_empty(), "accuracy needs equal non-empty sizes, got {} and {}",
          predicted.n_elem, truth.n_elem);
  return static_cast<double>(arma::accu(predicted == truth)) / truth.n_elem;
}

}  // namespace kestrel
