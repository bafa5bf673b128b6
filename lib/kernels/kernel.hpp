// The scaled softmax kernel K^(alpha)(x,y) = exp(alpha|x|^2 + x^T y + alpha|y|^2) (DERF eq. in
// section 2.1): alpha = 0 is the softmax kernel, alpha = -1/2 the Gaussian kernel. Log domain.
#pragma once
#include <string>

#include <armadillo>

namespace kestrel {

struct Kernel {
  double alpha = 0.0;  // 0: softmax, -1/2: Gaussian

  static Kernel softmax() { return {0.0}; }
  static Kernel gaussian() { return {-0.5}; }
  // "softmax", "gaussian", or "scaled:<alpha>".
  static Kernel parse(const std::string& name);
  std::string name() const;
};

// Pairwise |x_i + s y_j|^2 for columns of X (d x Lx) and Y (d x Ly), summed directly (no
// cancellation from |x|^2 + |y|^2 + 2 s x^T y).
arma::mat pairwise_sq_norm_sum(const arma::mat& X, const arma::mat& Y, double s);

// log K^(alpha)(x_i, y_j) for all pairs: Lx x Ly.
arma::mat log_kernel(const Kernel& k, const arma::mat& X, const arma::mat& Y);

// Exact K^(alpha)(X, Y) C in O(Lx Ly (d + n)), evaluated stably (row-wise shift by the row maximum).
arma::mat kernel_times(const Kernel& k, const arma::mat& X, const arma::mat& Y, const arma::mat& C);

// Checks that a point set is d x L with d, L > 0 and finite entries; names the set in the error.
void validate_points(const arma::mat& X, const char* name);

// validate_points on X and Y, and the same dimension for both.
void validate_sets(const arma::mat& X, const arma::mat& Y);

}  // namespace kestrel
