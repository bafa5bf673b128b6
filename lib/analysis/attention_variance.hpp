// The error of random-feature attention rows, Y-hat_i = (K-hat V)_i / (K-hat 1)_i, predicted from the exact moments
// of K-hat C (operator_variance.hpp, C = [V, 1]) by the delta method, and measured by simulation to check it.
// With N = (K V)_i, D = (K 1)_i and Y = N / D, expanding N-hat/D-hat around (N, D) to second order:
//   bias_a = E[Y-hat_a] - Y_a ~ (Y_a Var D - Cov(N_a, D)) / D^2,
//   MSE    = E|Y-hat - Y|^2   ~ sum_a Var(N_a - Y_a D) / D^2 = sum_a (Var N_a - 2 Y_a Cov(N_a, D) + Y_a^2 Var D) / D^2,
// both O(1/M) with remainders O(1/M^2): relative errors of order r = Var D / D^2 (the normaliser's relative variance)
// times the standardised higher moments of the features. Measured against simulation (20000 draws, softmax kernel,
// d = 4; the closing note of issue 17 has the table): OPRF and SDERF agree within Monte Carlo error (about 1%) where
// r <= 0.01, and are 2-13% off for r in 0.03-0.15. Heavy tails break the expansion earlier: PosRF is 15% high even at
// r = 0.016 (rare huge features inflate Var N and Var D while the ratio stays bounded). So rows are flagged
// (`outside`) where r > kDeltaMethodMaxRelVar, and, for positive features, where the prediction exceeds the bound
// that holds for any draw, |Y-hat_i - Y_i|^2 <= sum_a max_j (V_ja - Y_ia)^2 (Y-hat_i is a convex combination of
// V's rows). For features that can be negative (TrigRF) D-hat has a positive density at 0 and the ratio has no
// finite MSE at all: the prediction is that of the linearised estimate, and Cantelli's inequality bounds
// P(D-hat <= 0) <= r / (1 + r).
#pragma once
#include <cstdint>

#include <armadillo>

#include "analysis/montecarlo.hpp"
#include "estimators/three_point.hpp"
#include "kernels/kernel.hpp"

namespace kestrel {

// Where the delta method's leading term agrees with the measured MSE for light-tailed features (see above).
inline constexpr double kDeltaMethodMaxRelVar = 0.01;

struct AttentionPrediction {
  arma::vec log_mse;              // log of the predicted E|Y-hat_i - Y_i|^2 (leading order; -inf where exact)
  arma::vec log_norm_y;           // log |Y_i|
  arma::vec log_bias;             // log |bias_i| (the vector norm over V's columns; -inf where 0)
  arma::vec log_rel_var;          // log r_i = log(Var D_i / D_i^2)
  arma::vec p_nonpositive_bound;  // Cantelli's bound on P(D-hat_i <= 0); 0 for positive features
  arma::vec log_mse_bound;        // positive features: log sum_a max_j (V_ja - Y_ia)^2 (holds for every draw); +inf
  arma::uvec outside;             // 1 where r_i > kDeltaMethodMaxRelVar or the prediction exceeds the bound
  arma::mat Y;                    // exact attention output, Lx x dv
};

// Predicted error of the attention rows for queries X (d x Lx), keys Y (d x Ly), values V (Ly x dv), M iid features
// of the estimator with this three-point form (positive: its features are positive, so D-hat > 0). rows: the query
// rows to predict (entry r of the result is query rows[r]; analysis/row_sample.hpp), empty for all; each row exactly
// as in the full computation, O(Ly^2) work and O(Ly) memory per row (ratio_moments).
AttentionPrediction predict_attention_error(const ThreePointForm& form, bool positive, const Kernel& k,
                                            const arma::mat& X, const arma::mat& Y, const arma::mat& V, arma::uword M,
                                            const arma::uvec& rows = {});

struct AttentionMeasurement {
  arma::vec mse, se_mse;   // per row: mean over draws of |Y-hat_i - Y_i|^2, and its standard error
  arma::uvec nonpositive;  // per row: draws with D-hat_i <= 0
  std::size_t reps = 0;
};

// R draws of M features (opt.reps, opt.features, opt.seed, opt.sampler; rep r from stream (seed, MonteCarlo, r)),
// in fixed chunks combined in order: identical for any thread count.
AttentionMeasurement simulate_attention(const Estimator& e, const Kernel& k, const arma::mat& X, const arma::mat& Y,
                                        const arma::mat& V, const MonteCarloOptions& opt);

}  // namespace kestrel
