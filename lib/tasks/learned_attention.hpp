// Learned feature maps judged on held-out tokens (issue 65 items 1, 2, 5; the library core): a Hedgehog map
// (estimators/hedgehog) is fitted per M to one head's attention on some of its sequences and its error is measured on
// the others, with advise's rmse metric for a deterministic map: the row error
//   e_i = |Y-hat_i - Y_i| / RMS_i |Y_i|   (RMS over the rows of the set judged: the held-out rows, or the training
//   rows)
// with Y-hat the map's stabilised linear attention (approximate_attention; causal: approximate_causal_attention's
// prefix sums) and Y exact softmax attention (exact_causal_attention), and its 95th
// percentile over the rows. Sits in tasks/ (not analysis/) because it uses tasks/attention.hpp.
#pragma once
#include <cstdint>
#include <vector>

#include <armadillo>

#include "core/rng.hpp"
#include "estimators/hedgehog/fit.hpp"

namespace kestrel {

// One head over several sequences: sequence s has queries Q[s] (d x Lq_s), keys K[s] (d x Lk_s) and values V[s]
// (Lk_s x dv), unscaled (logits q^T k / sqrt(d)); a query attends to every key of its own sequence (bidirectional),
// or, causal (a decoder's mask), query column r to keys 0..r (Lq_s = Lk_s): fitted, judged and recomputed so.
struct HeadSequences {
  std::vector<arma::mat> Q, K, V;
  bool causal = false;
};

struct LearnedCurveOptions {
  std::vector<arma::uword> features = {8, 16, 32, 64};  // the M grid: even, strictly increasing (M = 2P)
  arma::uword held_out = 1;   // sequences held out by each fit: >= 1 and below the number of sequences
  arma::uword fit_seeds = 3;  // S fits, each with its own initialisation and its own split
  // Query rows per training sequence that enter the objective (a seeded subset; 0: all). Every training row is judged.
  arma::uword max_fit_rows = 1024;
  std::uint64_t seed = kDefaultSeed;
  double quantile = 0.95;
  HedgehogFitOptions fit;  // per M; the first M starts from hedgehog_init, the next from hedgehog_extend of the last
};

// Row errors of one set of rows and their quantile.
struct LearnedRowErrors {
  arma::vec errors;  // e_i per row: sequences in the order given, rows in order within each
  double quantile = 0;
  // Order-statistic SE: half the distance between the order statistics at ranks n q -+ sqrt(n q (1 - q)) (the +-1 SD
  // of the binomial count of rows below the true quantile; rounded outwards, clamped to 1..n). Rows of one sequence
  // share its keys and are not independent: the spread over fit seeds (LearnedCurvePoint) also sees the split.
  double quantile_se = 0;
};

// One fit (one seed at one M).
struct LearnedFitResult {
  HedgehogFit fit;                                 // fit.params: W (P x d), b (P); named_parameters() names them
  arma::uvec train_sequences, held_out_sequences;  // indices into HeadSequences, ascending
  LearnedRowErrors held_out, train;                // every row of the held-out and of the training sequences
  double fit_seconds = 0;  // wall time of fit_hedgehog (fits of different seeds run in parallel)
};

struct LearnedCurvePoint {
  arma::uword M = 0;
  std::vector<LearnedFitResult> fits;  // one per fit seed, in seed order
  // Over the fit seeds: mean and SE (sample SD / sqrt(S); 0 when S = 1) of the held-out quantile, the mean training
  // quantile and the mean gap (held-out - training quantile), and the mean fit time.
  double held_out_mean = 0, held_out_se = 0, train_mean = 0, gap_mean = 0, fit_seconds = 0;
};

// For every M of opt.features, S fits and their held-out judgement. Fit s (0-based) draws everything from
// fit_seed(opt.seed, s): the split from Rng(., Stream::Data, 0) (a shuffle; the first opt.held_out sequences are held
// out), the training rows of sequence t from Rng(., Stream::Data, 1 + t), the initial W from hedgehog_init's streams.
// Fits run in parallel over seeds into fixed slots: every number but the times is identical for any thread count.
// Throws InvalidArgument naming a bad input (fewer than 2 sequences, mismatched sizes, non-finite values, bad grid).
std::vector<LearnedCurvePoint> learned_attention_curve(const HeadSequences& head, const LearnedCurveOptions& opt = {});

// The seed of fit s: mix64 of seed and s, so fits draw from disjoint streams.
std::uint64_t fit_seed(std::uint64_t seed, arma::uword s);

// The row errors of map p on the sequences `which` of head (the RMS over all their rows), and the quantile.
LearnedRowErrors learned_row_errors(const HedgehogParams& p, const HeadSequences& head, const arma::uvec& which,
                                    double quantile = 0.95);

// The q-quantile of v (linear interpolation between order statistics, as advise) and its order-statistic SE (above).
double row_quantile(const arma::vec& v, double q);
double row_quantile_se(const arma::vec& v, double q);

}  // namespace kestrel
