// `kestrel advise`: which random-feature estimator, how many features, and which number format, for a user's own
// queries Q, keys K (and values V). Predictions per quantity:
//   attention rows (V given; --metric picks the error, default rmse: sqrt(E|Y-hat_i - Y_i|^2) / RMS_i |Y_i|): simulated
//     on the user's own points with nested draws (analysis/nested_attention.hpp), for every sampler, at every M of a
//     grid from 1 to the budget, each number with its standard error. The delta method's leading term was 2-4x too
//     high at the M people use (the linearisation keeps the heavy tails of K-hat V and K-hat 1, while Y-hat_i is a
//     bounded convex combination of V's rows), so it no longer predicts here (its range is tested in
//     tests/nested_attention_test.cpp);
//   normaliser (no V): sqrt(Var D-hat_i) / D_i for D = K 1, exact for iid features of families with a three-point form
//     (e(1)/sqrt(M)), simulated like the rows otherwise;
//   kernel: sqrt(Var / K^2) of the entries K(q_i, k_j), exact, also with orthogonal and simplex projections
//     (analysis/coupled_variance.hpp).
// The M for a target is read off the curve of the 95th percentile over a seeded sample of query rows (or pairs),
// interpolated in log-log between grid points, with the interval where the curve +- 2 SE crosses the target. A
// simulated curve stops 2x past the M where its p95 + 2 SE reaches the target, or where the target is out of reach
// within the budget (OutOfReach; --full-curve: at the budget).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <armadillo>
#include <nlohmann/json.hpp>

#include "kernels/kernel.hpp"
#include "sampling/omega.hpp"

namespace kestrel {

enum class AdviseQuantity { Attention, Kernel };
std::string to_string(AdviseQuantity q);  // "attention", "kernel"

// The error of attention row i that the quantiles are over (E over draws of M features):
//   Rmse:        sqrt(E|Y-hat_i - Y_i|^2) / RMS_i |Y_i| (relative to the RMS output row: rows near 0 do not blow up);
//   MeanAbs:     E mean_a |Y-hat_ia - Y_ia| / mean_ia |Y_ia| (the figure quoted in public issue threads);
//   RowRelative: sqrt(E|Y-hat_i - Y_i|^2) / |Y_i|;
//   Centred:     sqrt(E|Y-hat_i - Y_i|^2) / RMS_i |Y_i - v|, v the mean row of V: for positive features Y-hat_i - v is
//                the estimate of the centred output Y_i - v, so this is the relative error of the centred output;
//   Tv:          E (1/2) sum_j |A-hat_ij - A_ij|, the total-variation error of row i of the normalised attention
//                matrix A = diag(K 1)^-1 K (independent of V).
// Without V (the normalisers) only Rmse (sqrt(E (D-hat_i / D_i - 1)^2)) and Tv apply.
enum class AdviseMetric { Rmse, MeanAbs, RowRelative, Centred, Tv };
std::string to_string(AdviseMetric m);  // "rmse", "mean-abs", "row-relative", "centred", "tv"
AdviseMetric parse_metric(const std::string& name);
const std::vector<std::string>& metric_names();

struct AdviseOptions {
  AdviseQuantity quantity = AdviseQuantity::Attention;
  Kernel kernel = Kernel::softmax();
  bool scale_sqrt_d = true;  // logits q.k / sqrt(d): points divided by d^(1/4)
  AdviseMetric metric = AdviseMetric::Rmse;
  double target = 0.1;                  // of the metric
  arma::uword budget = 4096;            // largest M considered
  std::vector<std::string> estimators;  // empty: every family in the registry (inapplicable ones say why)
  std::vector<Sampler> samplers{Sampler::Iid, Sampler::Orthogonal};
  arma::uword rows = 512;    // query rows sampled (all when fewer)
  arma::uword pairs = 4096;  // kernel: (query, key) pairs sampled
  std::size_t validate = 0;  // R draws at each estimator's M for the target (0: none; rows that do not
                             // reach the target within the budget are not drawn)
  std::size_t draws = 64;    // simulated predictions: nested draws up to M = 128, fewer above (prediction_draws)
  bool full_curve = false;   // simulate every curve to the budget (default: 2x past the first M whose p95 + 2 SE
                             // reaches the target, or where it is out of reach: OutOfReach)
  std::uint64_t seed = 0;
  bool timing = true;  // time exact and random-feature attention on this machine
};
nlohmann::json to_json(const AdviseOptions& o);

// Largest and smallest natural-log magnitudes a format holds: finite maximum, smallest normal, smallest subnormal.
struct NumberFormat {
  std::string name;
  double log_max, log_min_normal, log_min_subnormal;
};
const std::vector<NumberFormat>& number_formats();  // fp32, bf16, fp16

// The exponents of one draw's features (natural logs of |feature|) and of the key sums S^T 1 that every output row
// divides by, with and without the stabiliser (tasks/attention.hpp: a per-query-row max and one key max subtracted).
struct FeatureRange {
  bool stabilisable = false;  // positive features: log-features exist
  double query_max = 0, query_min = 0, key_max = 0, key_min = 0, key_sum_max = 0;  // raw
  double s_query_min = 0, s_key_min = 0, s_key_sum_max = 0;  // stabilised (maxima are 0 by construction)
  double row_max_min = 0;  // smallest over query rows of the row's largest feature: the row underflows below it
  // Per format, raw and stabilised: "ok" or what fails ("overflow: features e^95.1", "underflow: rows lose every
  // feature below e^-104"). Stabilised is "n/a" where features are not positive.
  std::vector<std::pair<std::string, std::string>> verdict;  // (raw, stabilised) per number_formats() entry
};

// A simulated curve that stopped short of the budget because the target is out of reach there: an extrapolation,
// labelled as one. At the curve's last M (from_m) the 95th percentile - 2 SE is p95_low; the curve is assumed to fall
// no faster beyond it than it fell over its last two octaves (p95 - 2 SE against p95 + 2 SE two octaves earlier, the
// steepest slope its noise allows), and no faster than M^(-1/2), the rate of an average of independent draws (for
// orthogonal and simplex features too: their blocks of d are independent, and from_m >= 4 d). Then the 95th percentile
// at the budget is at least p95_low (budget / from_m)^slope > target, and the target needs at least
// from_m (p95_low / target)^(-1/slope) features. Checked against curves simulated to the budget
// (tests/advise_test.cpp).
struct OutOfReach {
  arma::uword from_m = 0;
  double p95_low = 0;        // p95 - 2 SE at from_m
  double slope = 0;          // <= -1/2: d log(error) / d log(M) assumed beyond from_m
  double p95_at_budget = 0;  // at least this at the budget
  double m_for_target = 0;   // at least this many features for the target (> the budget)
};

struct AdviceRow {
  std::string estimator, sampler;
  std::string status = "ok";  // ok, or "not applicable" / "failed"
  std::string reason;         // why, where status is not ok
  std::string method;         // "exact", "exact (coupled)", "simulated (...)": what gave the numbers
  std::string note;           // what was not done for an ok row, and why
  // log(Var/K^2) at M = 1 over the sampled (query, key) pairs.
  double log_rel_var_median = 0, log_rel_var_p95 = 0;
  // The predicted error at M = 1 (iid) and at the budget (at the curve's last M where a simulated curve stopped
  // early: see full_curve): median and 95th percentile over rows (or pairs).
  double err1_median = 0, err1_p95 = 0, err_budget_median = 0, err_budget_p95 = 0;
  // Smallest M with the predicted median / 95th-percentile error <= target; 0 if none up to the budget.
  arma::uword m_median = 0, m_p95 = 0;
  double at_m_median = 0, at_m_p95 = 0;  // the predicted error at m_p95 (or at the budget if it is 0)
  double at_m_p95_se = 0;                // its standard error (0 where exact)
  // Where the 95th-percentile curve - 2 SE and + 2 SE reach the target (0: not within the budget): the M the
  // simulation's own noise allows. Equal to m_p95 where the prediction is exact.
  arma::uword m_p95_low = 0, m_p95_high = 0;
  // Where a simulated curve ended because the target is out of reach within the budget (see OutOfReach).
  std::optional<OutOfReach> out_of_reach;
  // Predicted error against M (the grid) with standard errors and the draws behind each point (0 where exact).
  std::vector<double> curve_m, curve_median, curve_p95, curve_median_se, curve_p95_se, curve_draws;
  arma::vec err1_each;  // the predicted error at M = 1 of each sampled row (attention) or pair (kernel, column-major)
  std::optional<FeatureRange> range;
  // --validate R: measured at m_p95 with R draws (rows with m_p95 = 0 are not validated); median / 95th percentile over
  // the same rows, and the standard error of the row at that quantile.
  std::size_t validate_reps = 0;
  arma::uword validate_m = 0;
  double measured_median = 0, measured_p95 = 0, measured_p95_se = 0;
  bool within_target(double target) const;  // measured p95 - 3 SE <= target (true when not validated)
};

inline constexpr arma::uword kExactTimedRows = 2048;

struct AdviceCost {
  double exact_flops = 0, exact_bytes = 0;
  std::vector<arma::uword> m;  // the M of the rows that reach the target, ascending
  std::vector<double> rf_flops, rf_bytes, crossover_length;
  double exact_seconds = -1, rf_seconds = -1;  // measured on this machine (-1: not measured)
  // Query rows exact attention was timed on: all up to kExactTimedRows, else that many and the time scaled by
  // Lq / rows (its cost is exactly proportional to Lq: each row is one pass over the keys).
  arma::uword exact_timed_rows = 0;
  arma::uword timed_m = 0;
  std::string timed_estimator;
  std::string rf_not_timed;  // why rf_seconds is -1 although exact attention was timed (its features do not fit)
};

struct Advice {
  AdviseOptions options;
  arma::uword d = 0, Lq = 0, Lk = 0, dv = 0;
  std::string quantity_label;  // what the error is of (printed and stored)
  arma::uvec sampled_rows;     // query rows the quantiles are over
  std::vector<AdviceRow> rows;
  std::optional<std::size_t> best;  // index into rows
  AdviceCost cost;
  double offset_share = 0;     // |v|^2 / mean_i |Y_i|^2, v the mean row of V: near 1, |Y| is mostly V's offset
  std::string recommendation;  // plain words with the numbers
};

// The feature counts the simulated predictions are made at: round(2^(k/4)) from 1 to the budget (the budget last),
// and the nested draws reaching each: `draws` up to M = 128, then draws * sqrt(128 / M), at least draws / 4 (and 2).
std::vector<arma::uword> prediction_grid(arma::uword budget);
std::vector<std::size_t> prediction_draws(const std::vector<arma::uword>& grid, std::size_t draws);

// Q: d x Lq queries, K: d x Lk keys (columns are tokens), V: Lk x dv values or empty. Throws InvalidArgument for
// mismatched shapes, non-finite or empty input and invalid options (naming the value). A family that cannot be fitted
// or evaluated is recorded with its reason and does not stop the others.
Advice advise(const arma::mat& Q, const arma::mat& K, const arma::mat& V, const AdviseOptions& opt,
              const std::function<void(const std::string&)>& progress = {});

nlohmann::json to_json(const Advice& a);

}  // namespace kestrel
