// The synthetic clustered data of HRF appendix H.3 (Fig. 6, Table 3): two Gaussian clusters of queries
// with means O_i1 X0 and two of keys with means O_j2 Y0 (random X0, Y0, Haar O_ij), covariance sigma^2 I,
// every point scaled to one l2 norm, and the signs of the means' elements adjusted so that the loss
// s = l(A) of eq. 21 at the best real diagonal A (eq. 88) takes the paper's values for the four pairs.
#pragma once
#include <array>
#include <cstdint>

#include <armadillo>

namespace kestrel {

struct H3Options {
  arma::uword dim = 50, per_cluster = 1000;
  double base_scale = 1;      // X0, Y0 ~ N(0, base_scale^2 I)
  double sigma = 1;           // within-cluster standard deviation, before the scaling to `norm`
  double norm = 1;            // every point's l2 norm
  std::array<double, 4> s{};  // target s for the four pairs of clusters, in any order (Table 3's lists)
};

struct H3Data {
  arma::mat X, Y;                        // dim x (2 per_cluster): cluster 1 in the first per_cluster columns
  arma::mat s_target;                    // 2 x 2: the target given to the pair (x cluster i, y cluster j)
  arma::mat s_means;                     // 2 x 2: min over real diagonal A of l(A) at the clusters' sample means
  arma::uword adjusted_coordinates = 0;  // coordinates whose sign pattern was changed from "x > 0 > y"
};

// s for real diagonal A at centres (a, b): sum over coordinates with a_k b_k > 0 of 4 a_k b_k (eq. 88 zeroes
// the others). Signs are adjusted, as the paper does by hand, by a deterministic search: first every
// coordinate of the x clusters' means positive and of the y clusters' negative (s = 0), then for each
// coordinate one of the 8 sign patterns of (x1, x2, y1, y2) that make 0, 2 or 4 pairs agree, by coordinate
// descent on the summed squared relative error, for each of the 24 assignments of targets to pairs. A
// sign change of a mean's element is applied as the reflection of that coordinate of the cluster's points
// (the same distribution, since the noise is symmetric, and the same norms).
H3Data h3_clustered(const H3Options& opt, std::uint64_t seed);

// The loss s(a, b) above for one pair of centres.
double h3_real_diagonal_loss(const arma::vec& a, const arma::vec& b);

}  // namespace kestrel
