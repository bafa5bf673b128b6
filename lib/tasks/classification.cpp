// Nadaraya-Watson kernel classification, exact and with random features (see classification.hpp).
#include "tasks/classification.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/logmath.hpp"
#include "core/parallel.hpp"
#include "core/rng.hpp"
#include "core/vecmath.hpp"
#include "estimators/registry.hpp"
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
  const arma::mat lk = log_kernel(Kernel::gaussian(), sigma * test, sigma * train).t();  // L x n_test
  arma::mat out(n_classes, test.n_cols, arma::fill::value(-kInf));
  arma::vec v(train.n_cols);
  for (arma::uword t = 0; t < test.n_cols; ++t) {  // per class: max + log sum exp(lk - max), summed in training order
    const double* l = lk.colptr(t);
    arma::vec mx(n_classes, arma::fill::value(-kInf));
    for (arma::uword i = 0; i < train.n_cols; ++i) mx(labels(i)) = std::max(mx(labels(i)), l[i]);
    for (arma::uword i = 0; i < train.n_cols; ++i) v(i) = l[i] - mx(labels(i));
    simd::exp_libm(v.memptr(), v.n_elem);  // std::exp's bits: a tie between two classes stays a tie
    arma::vec acc(n_classes, arma::fill::zeros);
    for (arma::uword i = 0; i < train.n_cols; ++i) acc(labels(i)) += v(i);
    for (arma::uword c = 0; c < n_classes; ++c)
      if (mx(c) > -kInf) out(c, t) = mx(c) + std::log(acc(c));
  }
  return out;
}

arma::mat nw_scores_rf(const FeatureMap& e, const Draw& w, const arma::mat& train, const arma::uvec& labels,
                       arma::uword n_classes, const arma::mat& test, double sigma) {
  validate_task(train, labels, n_classes, test, sigma);
  arma::mat R(train.n_cols, n_classes, arma::fill::zeros);
  for (arma::uword i = 0; i < train.n_cols; ++i) R(i, labels(i)) = 1.0;
  return approximate_kernel_times(e, w, sigma * test, sigma * train, R, Kernel::gaussian()).t();
}

namespace {
// Gaussian-kernel features of sigma X, stabilised (see nw_predict_rf): per_row for queries, one global shift for keys.
arma::mat stable_features(const FeatureMap& e, const Draw& w, const arma::mat& X, Side side, bool per_row) {
  const arma::vec gauss = -0.5 * arma::sum(arma::square(X), 0).t();
  if (!e.info().positive) {
    arma::mat F = e.features(w, X, side, gauss);
    if (!F.is_finite())
      throw NumericalError(fmt::format("estimator '{}': features overflow for points with |x|^2 up to {:g}",
                                       e.info().name, -2 * gauss.min()));
    return F;
  }
  arma::mat L = e.log_features(w, X, side);
  // Two passes over L: add the Gaussian factor and track the maxima (exact, so the order does not matter), then
  // exp(L - max) column by column while the column is in cache. simd::exp_libm has std::exp's bits, so class scores
  // that tie to rounding still tie the same way.
  const arma::uword n = L.n_rows;
  arma::vec shift(n, arma::fill::value(-kInf));
  double* mx = shift.memptr();
  for (arma::uword j = 0; j < L.n_cols; ++j) {
    double* c = L.colptr(j);
    for (arma::uword i = 0; i < n; ++i) {
      c[i] += gauss[i];
      mx[i] = c[i] > mx[i] ? c[i] : mx[i];
    }
  }
  if (!per_row) shift.fill(shift.max());
  for (arma::uword j = 0; j < L.n_cols; ++j) {
    double* c = L.colptr(j);
    for (arma::uword i = 0; i < n; ++i) c[i] -= mx[i];
    simd::exp_libm(c, n);
  }
  return L;
}
}  // namespace

arma::uvec nw_predict_rf(const FeatureMap& e, const Draw& w, const arma::mat& train, const arma::uvec& labels,
                         arma::uword n_classes, const arma::mat& test, double sigma, arma::uword* all_zero) {
  validate_task(train, labels, n_classes, test, sigma);
  require(train.n_rows == e.dim(), "points have dimension {}, estimator '{}' was fitted for {}", train.n_rows,
          e.info().name, e.dim());
  arma::mat R(train.n_cols, n_classes, arma::fill::zeros);
  for (arma::uword i = 0; i < train.n_cols; ++i) R(i, labels(i)) = 1.0;
  const arma::mat S = stable_features(e, w, sigma * train, Side::Key, false);
  const arma::mat P = stable_features(e, w, sigma * test, Side::Query, true);
  const arma::mat scores = (P * (S.t() * R)).t();
  if (all_zero) *all_zero = arma::accu(arma::all(scores == 0.0, 0));
  return argmax_rows_per_column(scores);
}

arma::uvec argmax_rows_per_column(const arma::mat& scores) { return arma::index_max(scores, 0).t(); }

double accuracy(const arma::uvec& predicted, const arma::uvec& truth) {
  require(predicted.n_elem == truth.n_elem && !truth.is_empty(), "accuracy needs equal non-empty sizes, got {} and {}",
          predicted.n_elem, truth.n_elem);
  return static_cast<double>(arma::accu(predicted == truth)) / truth.n_elem;
}

// ---- protocol ------------------------------------------------------------------------------------------------

std::vector<double> NwOptions::default_sigmas() {
  const arma::vec g = arma::logspace(-2.0, 2.0, 10);
  return {g.begin(), g.end()};
}

double NwResult::test_std() const { return test_accuracy.n_elem > 1 ? arma::stddev(test_accuracy, 1) : 0.0; }

void validate_split(const LabeledSplit& s) {
  validate_labeled(s.train, s.train_labels, s.n_classes);
  validate_labeled(s.validation, s.validation_labels, s.n_classes);
  validate_labeled(s.test, s.test_labels, s.n_classes);
  require(s.validation.n_rows == s.train.n_rows && s.test.n_rows == s.train.n_rows,
          "train, validation and test points must have the same d, got {}, {}, {}", s.train.n_rows, s.validation.n_rows,
          s.test.n_rows);
}

LabeledSplit split_standardized(const UciData& d, std::uint64_t seed) {
  require(!d.labels.is_empty() && !d.classes.empty(), "data set '{}' has no class labels", d.name);
  const Split sp = split_90_5_5(d.X.n_cols, seed);
  const Standardizer st = Standardizer::fit(d.X.cols(sp.train));
  LabeledSplit s{.train = st.apply(d.X.cols(sp.train)),
                 .validation = st.apply(d.X.cols(sp.validation)),
                 .test = st.apply(d.X.cols(sp.test)),
                 .train_labels = d.labels.elem(sp.train),
                 .validation_labels = d.labels.elem(sp.validation),
                 .test_labels = d.labels.elem(sp.test),
                 .n_classes = d.classes.size()};
  validate_split(s);
  return s;
}

namespace {

void validate_options(const NwOptions& o) {
  require(!o.sigmas.empty(), "the sigma grid is empty");
  for (double sg : o.sigmas) require(std::isfinite(sg) && sg > 0, "sigma must be > 0, got {}", sg);
  require(o.seeds > 0, "number of seeds must be > 0, got 0");
  require(o.M >= 2, "number of features M must be >= 2, got {}", o.M);
}

// Index of the largest mean validation accuracy; the first (smallest sigma) on ties.
arma::uword best_sigma(const arma::mat& val) {
  const arma::rowvec m = arma::mean(val, 0);
  arma::uword best = 0;
  for (arma::uword k = 1; k < m.n_elem; ++k)
    if (m(k) > m(best)) best = k;
  return best;
}

}  // namespace

std::unique_ptr<Estimator> fit_for_classification(const std::string& name, const arma::mat& Q, const arma::mat& T) {
  return make_estimator_from_reference(name, Q, T);
}

NwResult nw_protocol_exact(const LabeledSplit& s, const NwOptions& o) {
  validate_split(s);
  validate_options(o);
  NwResult r;
  r.method = "exact";
  r.sigmas = arma::vec(o.sigmas);
  r.validation_accuracy.set_size(1, o.sigmas.size());
  r.no_signal.zeros(o.sigmas.size());
  r.overflow.zeros(o.sigmas.size());
  for (arma::uword k = 0; k < o.sigmas.size(); ++k) {
    const arma::mat sc = nw_log_scores_exact(s.train, s.train_labels, s.n_classes, s.validation, o.sigmas[k]);
    r.validation_accuracy(0, k) = accuracy(argmax_rows_per_column(sc), s.validation_labels);
  }
  r.best = best_sigma(r.validation_accuracy);
  const arma::mat sc = nw_log_scores_exact(s.train, s.train_labels, s.n_classes, s.test, o.sigmas[r.best]);
  r.test_accuracy = {accuracy(argmax_rows_per_column(sc), s.test_labels)};
  return r;
}

NwResult nw_protocol_rf(const std::string& estimator, const LabeledSplit& s, const NwOptions& o) {
  validate_split(s);
  validate_options(o);
  const std::size_t n_sigma = o.sigmas.size(), seeds = o.seeds;
  NwResult r;
  r.method = estimator;
  r.M = o.M;
  r.sigmas = arma::vec(o.sigmas);
  r.validation_accuracy.set_size(seeds, n_sigma);
  r.no_signal.zeros(n_sigma);
  r.overflow.zeros(n_sigma);
  // Accuracy of one draw; `zeros` is the share of queries whose class scores are all exactly 0 (underflow: argmax
  // picks class 0, as NumPy's would). A draw whose features overflow double range cannot predict: accuracy 0,
  // counted in `over`.
  auto run = [&](const Estimator& e, const arma::mat& Q, const arma::uvec& truth, double sigma, std::uint64_t stream,
                 double& zeros, double& over) {
    Rng rng(o.seed, Stream::Features, stream);
    const Draw w = e.draw(r.omegas, rng, o.sampler);
    arma::uword n_zero = 0;
    try {
      const arma::uvec pred = nw_predict_rf(e, w, s.train, s.train_labels, s.n_classes, Q, sigma, &n_zero);
      zeros = static_cast<double>(n_zero) / Q.n_cols, over = 0;
      return accuracy(pred, truth);
    } catch (const NumericalError&) {
      zeros = 0, over = 1;
      return 0.0;
    }
  };
  for (std::size_t k = 0; k < n_sigma; ++k) {
    const double sg = o.sigmas[k];
    const auto e = fit_for_classification(estimator, sg * s.validation, sg * s.train);
    r.omegas = e->info().complex ? o.M / 2 : o.M;
    std::vector<double> zeros(seeds), over(seeds);
    for_each_block(seeds, [&](std::size_t j) {
      r.validation_accuracy(j, k) =
          run(*e, s.validation, s.validation_labels, sg, 2 * (k * seeds + j), zeros[j], over[j]);
    });
    r.no_signal(k) = arma::mean(arma::vec(zeros));
    r.overflow(k) = arma::mean(arma::vec(over));
  }
  r.best = best_sigma(r.validation_accuracy);
  const double sg = o.sigmas[r.best];
  const auto e = fit_for_classification(estimator, sg * s.test, sg * s.train);
  r.omegas = e->info().complex ? o.M / 2 : o.M;
  r.test_accuracy.set_size(seeds);
  std::vector<double> zeros(seeds), over(seeds);
  for_each_block(seeds, [&](std::size_t j) {
    r.test_accuracy(j) = run(*e, s.test, s.test_labels, sg, 2 * (r.best * seeds + j) + 1, zeros[j], over[j]);
  });
  return r;
}

}  // namespace kestrel
