// Training LUNA maps (LUNA section 3.2; issue #9): gradients by hand-written reverse mode (issue #19; Ceres'
// automatic differentiation with Jets is kept as the tested reference), minimised by Ceres' L-BFGS
// (GradientProblemSolver, single-threaded, so training is deterministic from the seed). Two objectives over the
// trainable parameters of a variant (luna.hpp):
//  kernel fitting: mean over training pairs of ((phi(x_i)^T phi(x_j) - K(x_i, x_j)) / K(x_i, x_j))^2;
//  task fitting: Nadaraya-Watson classification (lib/tasks/classification.hpp) with k = phi^T phi, leave-one-out
//    scores r_ic = sum_{j != i} k(x_i, x_j) [y_j = c] and the cross-entropy of softmax_c(exp(t) r_ic / (n - 1)),
//    t a learned log-temperature (a positive scale: it does not change the argmax).
#pragma once
#include <cstdint>
#include <memory>

#include <armadillo>

#include "estimators/luna/luna.hpp"

namespace kestrel {

class LunaObjective {
 public:
  // X: d x n training points (already scaled); pairs: 2 x N column indices into X with i != j.
  static LunaObjective kernel_fit(const LunaParams& init, const arma::mat& X, const arma::umat& pairs);
  // X: d x n training points, labels < n_classes, n >= 2.
  static LunaObjective task_fit(const LunaParams& init, const arma::mat& X, const arma::uvec& labels,
                                arma::uword n_classes);
  ~LunaObjective();
  LunaObjective(LunaObjective&&) noexcept;

  arma::uword n_parameters() const;  // trainable parameters of the variant (0 for FixedRff)
  arma::vec initial() const;         // the trainable parameters of init, packed
  double value(const arma::vec& theta) const;
  double value_and_gradient(const arma::vec& theta, arma::vec& gradient) const;  // reverse mode by hand
  // The same by Ceres' dynamic automatic differentiation (16 parameters per pass: slow; the test's reference).
  double value_and_gradient_autodiff(const arma::vec& theta, arma::vec& gradient) const;
  LunaParams unpack(const arma::vec& theta) const;  // init with the trainable parameters replaced

 private:
  struct Impl;
  explicit LunaObjective(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct LunaTrainOptions {
  arma::uword iterations = 200;  // L-BFGS iterations
};

struct LunaTrainResult {
  LunaParams params;
  double initial_objective = 0, final_objective = 0;
  arma::uword iterations = 0, evaluations = 0;
  std::string termination;  // Ceres' message
};

LunaTrainResult train_luna(const LunaObjective& objective, const LunaTrainOptions& opt = {});

// N distinct random pairs (i != j) of columns of an n-point set, 2 x N, from Rng(seed, Stream::Fit, 1).
arma::umat random_pairs(arma::uword n, arma::uword N, std::uint64_t seed);

// Ceres' version string, for output files.
std::string ceres_version();

}  // namespace kestrel
