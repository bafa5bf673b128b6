// The scaled softmax kernel K^(alpha)(x,y) = exp(alpha|x|^2 + x^T y + alpha|y|^2) (DERF eq. in
// section 2.1): alpha = 0 is the softmax kernel, alpha = -1/2 the Gaussian kernel. Log domain.
#pragma once
#include <optional>
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

// Two point sets (columns of X, d x Lx, and Y, d x Ly) with what is computed from them once and then shared: the Gram
// product X^T Y and the squared norms. The kernel and the variances of the GERF family are functions of these, so a
// tile of the pairwise variance forms one BLAS product for both (issue #19). Holds references to X and Y, which must
// outlive it; computes on first use, so one object belongs to one thread.
class PairGram {
 public:
  PairGram(const arma::mat& X, const arma::mat& Y) : X(X), Y(Y) {}
  const arma::mat& X;
  const arma::mat& Y;
  const arma::mat& xy() const;     // X^T Y: Lx x Ly
  const arma::rowvec& x2() const;  // |x_i|^2
  const arma::rowvec& y2() const;  // |y_j|^2

 private:
  mutable std::optional<arma::mat> xy_;
  mutable std::optional<arma::rowvec> x2_, y2_;
};

// Pairwise |x_i + s y_j|^2 for columns of X (d x Lx) and Y (d x Ly): |x|^2 + s^2 |y|^2 + 2 s x^T y with one BLAS
// product, and entries that cancel recomputed directly (see recompute_cancelling), so x = -s y gives exactly 0.
arma::mat pairwise_sq_norm_sum(const arma::mat& X, const arma::mat& Y, double s);
// The same from a PairGram's shared product.
arma::mat pairwise_sq_norm_sum(const PairGram& g, double s);

// A pairwise sum of squares evaluated in Gram form (through BLAS) has an absolute error of about d eps times the
// magnitude of its terms, so it loses relative accuracy where it is small against them. Recomputes the entries with
// v(i, j) < magnitude(i, j) / 64 by direct(i, j), which bounds the relative error of every entry by ~64 d eps. The
// check is one vectorised pass; the scalar pass runs only for tiles that have such entries.
template <typename Magnitude, typename Direct>
inline __attribute__((always_inline)) void recompute_cancelling(arma::mat& v, Magnitude&& magnitude, Direct&& direct) {
  int any = 0;
  for (arma::uword j = 0; j < v.n_cols; ++j) {
    const double* c = v.colptr(j);
    for (arma::uword i = 0; i < v.n_rows; ++i) any |= c[i] < magnitude(i, j) * (1.0 / 64);  // finite inputs
  }
  if (!any) return;
  for (arma::uword j = 0; j < v.n_cols; ++j)
    for (arma::uword i = 0; i < v.n_rows; ++i)
      if (!(v(i, j) >= magnitude(i, j) * (1.0 / 64))) v(i, j) = direct(i, j);
}

// log K^(alpha)(x_i, y_j) for all pairs: Lx x Ly.
arma::mat log_kernel(const Kernel& k, const arma::mat& X, const arma::mat& Y);
arma::mat log_kernel(const Kernel& k, const PairGram& g);

// Exact K^(alpha)(X, Y) C in O(Lx Ly (d + n)), evaluated stably (row-wise shift by the row maximum), streamed over
// blocks of queries in parallel: memory O(block Ly), never Lx x Ly.
arma::mat kernel_times(const Kernel& k, const arma::mat& X, const arma::mat& Y, const arma::mat& C);

// Checks that a point set is d x L with d, L > 0 and finite entries; names the set in the error.
void validate_points(const arma::mat& X, const char* name);

// validate_points on X and Y, and the same dimension for both.
void validate_sets(const arma::mat& X, const arma::mat& Y);

}  // namespace kestrel
