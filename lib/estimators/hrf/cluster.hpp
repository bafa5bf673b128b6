// Clustered hybrid random features (HRF section 2.4 "Adaptation to data admitting clustering structure",
// appendix H.2 Definition H.2, eq. 85-88, 101-104): k-means on queries and on keys, one complex
// exponential estimator per pair of centres (r_i, r_j) with diagonal A_ij (real, eq. 88, or complex,
// eq. 85-87: exact at the centres), and zero-one lambdas (cluster indicators), so
//   S_hyb(x, y) = Re Psi_{A_ij}(x)^T Psi_{A_ij^-1}(y),  i = cluster of x, j = cluster of y.
// With deterministic lambdas the MSE at (x, y) is exactly the CE variance with A_ij (cexp.hpp); the
// Monte Carlo functions below give the empirical MSE averaged over pairs that HRF Fig. 6 / Table 3 plot.
#pragma once
#include <memory>
#include <vector>

#include "estimators/estimator.hpp"
#include "estimators/hrf/cexp.hpp"

namespace kestrel {

// ---- k-means (Lloyd's algorithm, k-means++ seeding from an explicit Rng: deterministic) ---------------
struct KMeansOptions {
  arma::uword k = 2;
  unsigned max_iter = 100;  // Lloyd iterations (stops earlier when no assignment changes)
};
struct KMeansResult {
  arma::mat centres;  // d x k
  arma::uvec labels;  // L, in [0, k)
  unsigned iterations = 0;
  bool converged = false;
};
// Throws unless X is a valid point set with L >= k >= 1. An empty cluster is re-seeded with the point
// farthest from its centre. Ties in the nearest centre go to the lowest index.
KMeansResult kmeans(const arma::mat& X, Rng& rng, const KMeansOptions& opt = {});
// Index of the nearest centre (squared Euclidean distance, lowest index on ties) of every column.
arma::uvec nearest_centre(const arma::mat& X, const arma::mat& centres);

// ---- Clustered HRF estimator ----------------------------------------------------------------------
struct ClusterHrfOptions {
  arma::uword query_clusters = 2;  // n_q
  arma::uword key_clusters = 2;    // n_k
  bool complex_diagonal = false;   // false: real diagonal A (eq. 88, the paper's Fig. 6); true: eq. 85-87
  unsigned max_iter = 100;         // k-means iterations
  std::uint64_t seed = 0;          // k-means++ seeding stream (seed, Fit, 0) for X and (seed, Fit, 1) for Y
  CexpDiagonalOptions diagonal{};
};

class ClusteredHrfEstimator final : public Estimator {
 public:
  // Fits k-means on X (queries) and Y (keys) and A_ij for every pair of centres.
  ClusteredHrfEstimator(std::string name, const arma::mat& X, const arma::mat& Y, const ClusterHrfOptions& opt = {});
  // Given centres (d x n_q, d x n_k) directly (the cluster counts of opt are ignored).
  struct Centres {
    arma::mat query, key;
  };
  ClusteredHrfEstimator(std::string name, Centres centres, const ClusterHrfOptions& opt = {});
  // Given centres and the diagonals A_ij (row-major over (i, j)): restore_hrf_cluster.
  ClusteredHrfEstimator(std::string name, Centres centres, std::vector<arma::cx_vec> diagonals);
  nlohmann::json params() const override;
  nlohmann::json state() const override;

  const arma::mat& query_centres() const { return cx_; }
  const arma::mat& key_centres() const { return cy_; }
  const arma::cx_vec& diagonal(arma::uword i, arma::uword j) const { return a_[i * cy_.n_cols + j]; }
  // l(A_ij) at the pair of centres (eq. 21): 0 for the complex diagonal.
  arma::mat centre_losses() const;

 protected:
  arma::mat log_var_hook(const PairGram& g) const override;
  // One draw of M projections is shared by all n_q n_k CE estimators. Real A: L x (n_q n_k M) features;
  // complex: L x (2 n_q n_k M), block (i, j) holding [Re, +-Im]. A query in cluster i is zero outside
  // the blocks (i, .), a key in cluster j outside (., j), so P S^T picks the CE estimate of A_ij.
  arma::mat features_hook(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale,
                          bool log) const override;
  // Real diagonals only: the exponent form with groups (estimator.hpp). A key y of cluster j has in block (i, j) the
  // exponent (y / a_ij)^T w - |y / a_ij|^2 / 2 = z^T p with z = [y; -|y / a_0j|^2 / 2; ...] (one entry per query
  // cluster) and p = [w / a_ij; e_i]; a query x of cluster i likewise with x a_ij and one entry per key cluster.
  // Its group is its cluster; block (i, j)'s columns belong to key cluster j (key side) and query cluster i.
  std::optional<Exponent> exponent_hook(const Draw* w, const arma::mat* X, Side side) const override;

 private:
  void fit_diagonals(const ClusterHrfOptions& opt);
  arma::mat cx_, cy_;
  std::vector<arma::cx_vec> a_;  // A_ij diagonal, row-major over (i, j)
};

std::unique_ptr<Estimator> make_hrf_cluster(const arma::mat& X, const arma::mat& Y);          // real diagonal
std::unique_ptr<Estimator> make_hrf_cluster_complex(const arma::mat& X, const arma::mat& Y);  // complex diagonal
std::unique_ptr<Estimator> restore_hrf_cluster(const nlohmann::json& state);
// A budget of M real feature columns: one draw gives columns for each of the 2 x 2 centre pairs, so M/4 draws.
arma::uword cluster_draws_for_columns(arma::uword M);

// ---- Empirical MSE over all pairs (HRF Fig. 6, Table 3) ---------------------------------------------
struct EmpiricalMseOptions {
  std::size_t trials = 20;   // independent draws (the paper averages 20)
  arma::uword features = 1;  // M per draw
  std::uint64_t seed = 0;    // trial t draws from stream (seed, MonteCarlo, t)
  Sampler sampler = Sampler::Iid;
};
struct EmpiricalMse {
  arma::vec per_trial;  // mean over all Lx Ly pairs of (K_hat - K)^2, one per trial
  double mean = 0, min = 0, max = 0;
  double se = 0;  // standard error of `mean` over trials
};
// Works for any estimator (the baselines FAVOR+ / TrigRF as well). Identical for any thread count.
EmpiricalMse empirical_mse(const Estimator& e, const Kernel& k, const arma::mat& X, const arma::mat& Y,
                           const EmpiricalMseOptions& opt);
// The exact counterpart: mean over all pairs of Var (= MSE) of the M-feature estimate.
double exact_mean_mse(const Estimator& e, const Kernel& k, const arma::mat& X, const arma::mat& Y, arma::uword M);
// Its logarithm, computed without overflow (the linear value is +inf beyond e^709).
double log_exact_mean_mse(const Estimator& e, const Kernel& k, const arma::mat& X, const arma::mat& Y, arma::uword M);

}  // namespace kestrel
