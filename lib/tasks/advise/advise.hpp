// `kestrel advise`: which random-feature estimator, how many features, and which number format, for a user's own
// queries Q, keys K (and values V); its steps are one file each in this folder (steps.hpp). Predictions per quantity:
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
// interpolated in log-log between grid points (whole blocks for orthogonal and simplex features), with the interval
// where the curve -+ 2 SE crosses the target. A simulated curve's first pass stops 2x past the M where its p95 + 2 SE
// reaches the target (--full-curve: at the budget); then fresh draws are added around the answer until it is settled
// (the interval at most kSettledWidth wide; "out of reach" only where a simulation at the budget says so) or
// --max-draws is spent ("not settled"). AdviceRow::decision says which.
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <armadillo>
#include <nlohmann/json.hpp>

#include "core/enum_names.hpp"
#include "core/rng.hpp"
#include "core/schema.hpp"
#include "io/record.hpp"
#include "kernels/kernel.hpp"
#include "sampling/omega.hpp"

namespace kestrel {

enum class AdviseQuantity { Attention, Kernel };
template <>
struct EnumNames<AdviseQuantity> {
  static constexpr std::string_view what = "quantity";
  static constexpr std::array<EnumName<AdviseQuantity>, 2> names{
      {{AdviseQuantity::Attention, "attention"}, {AdviseQuantity::Kernel, "kernel"}}};
};
inline std::string to_string(AdviseQuantity q) { return name_of(q); }

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
template <>
struct EnumNames<AdviseMetric> {
  static constexpr std::string_view what = "metric";
  static constexpr std::array<EnumName<AdviseMetric>, 5> names{{{AdviseMetric::Rmse, "rmse"},
                                                                {AdviseMetric::MeanAbs, "mean-abs"},
                                                                {AdviseMetric::RowRelative, "row-relative"},
                                                                {AdviseMetric::Centred, "centred"},
                                                                {AdviseMetric::Tv, "tv"}}};
};
inline std::string to_string(AdviseMetric m) { return name_of(m); }
inline AdviseMetric parse_metric(const std::string& name) { return parse_enum<AdviseMetric>(name); }
const std::vector<std::string>& metric_names();  // the table's names in order

struct AdviseOptions {
  AdviseQuantity quantity = AdviseQuantity::Attention;
  Kernel kernel = Kernel::softmax();
  bool scale_sqrt_d = true;  // logits q.k / sqrt(d): points divided by d^(1/4)
  AdviseMetric metric = AdviseMetric::Rmse;
  double target = 0.1;        // of the metric
  arma::uword budget = 4096;  // largest M considered
  bool pays_only = false;  // the budget capped at the largest M whose random-feature attention costs fewer FLOPs than
                           // exact attention at the input's L (paying_budget; a head of 197 tokens: M <= 98)
  std::vector<std::string> estimators;  // empty: every family in the registry (inapplicable ones say why)
  std::vector<Sampler> samplers{Sampler::Iid, Sampler::Orthogonal};
  arma::uword rows = 512;     // query rows sampled (all when fewer)
  arma::uword pairs = 4096;   // kernel: (query, key) pairs sampled
  std::size_t validate = 0;   // R draws at each estimator's M for the target (0: none; rows that do not
                              // reach the target within the budget are not drawn)
  std::size_t draws = 64;     // simulated predictions: nested draws up to M = 128, fewer above (prediction_draws)
  std::size_t max_draws = 0;  // most draws at the grid points around a simulated answer (0: as --time-budget allows)
  double time_budget = 60;    // seconds of simulation work per input (per head), at kWorkPerSecond
  bool full_curve = false;    // simulate every curve to the budget (default: 2x past the first M whose p95 + 2 SE
                              // reaches the target)
  std::uint64_t seed = kDefaultSeed;
  bool timing = true;  // time exact and random-feature attention on this machine
  // --sums: number formats (fp32, bf16, fp16) the key sums are emulated in (sums.cpp); --chunk: tokens per chunk
  // summed in fp32 before the chunk's total is added in the format (1: token by token, as in decoding).
  std::vector<std::string> sums;
  arma::uword chunk = 1;
  // Causal attention: query i attends to keys 0..i (Lq = Lk), its prefix sums as causal random-feature attention forms
  // them; the rows are sampled stratified over positions. from_position > 0: the decision is also made over the sampled
  // rows at positions >= from_position (AdviceRow::from).
  bool causal = false;
  arma::uword from_position = 0;
  // Learned candidates (learned.hpp; advise_sequences): the maps to fit per head ("hedgehog"), at each M of
  // learned_features, fit_seeds times, each fit holding out held_out of the sequences, with at most fit_iterations
  // L-BFGS iterations per M (hedgehog/fit.hpp's stop rule).
  std::vector<std::string> learned;
  std::vector<arma::uword> learned_features{8, 16, 32, 64};
  arma::uword fit_seeds = 3, held_out = 1, fit_iterations = 100;
};

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

// A decision is settled when its interval for M is at most this wide (upper / lower), or (whole blocks of orthogonal
// or simplex features) when its ends are adjacent blocks.
inline constexpr double kSettledWidth = 1.5;

// The simulation work of attention rows is counted, not timed, so that every decision is the same on every machine and
// for any thread count: a draw of M features on r sampled rows and L keys is M (r + L / 4) (d + dv + kExpWork) units
// (a key costs a quarter of a row: its features go through one matrix product; kExpWork: the exponentials and the
// log-domain scaling). --time-budget converts seconds to work at kWorkPerSecond, fitted to simulated rows on the
// 2-core machine the docs were written on (docs/advise.md, "Settled within a time budget").
// A draw's step from one grid point to the next also forms, rescales and judges each sampled row's output: r (dv + 1)
// times kRowStepWork units (kCausalRowStepWork with --causal: the prefix walk and each row's own update), whatever
// the step's width. Fitted on 2026-12-03 to first passes of 8192 draws at M <= 4 and <= 64 (L = 1024, d = dv = 64,
// 512 rows): 43 and 75 microseconds per draw and step on the 2-core machine, with the walk key by key; the walk in
// blocks of keys (analysis/causal_walk.cpp) left the count unchanged, so that no decision moved (a bench decoder
// layer: 68.4 counted seconds in 79.3 s of wall time).
constexpr double kExpWork = 64;
constexpr double kWorkPerSecond = 2e10;
constexpr double kRowStepWork = 26, kCausalRowStepWork = 45;

struct AdviceRow {
  std::string estimator, sampler;
  // Stacked inputs (heads.hpp): the query head's layer and index, and the key/value head it reads (absent for 2-D).
  std::optional<arma::uword> layer, head, kv_head;
  std::string status = "ok";  // ok, or "not applicable" / "failed"
  std::string reason;         // why, where status is not ok
  std::string method;         // "exact", "exact (coupled)", "simulated (...)": what gave the numbers
  std::string note;           // what was not done for an ok row, and why
  // log(Var/K^2) at M = 1 over the sampled (query, key) pairs.
  double log_rel_var_median = 0, log_rel_var_p95 = 0;
  // The predicted error at M = 1 (iid) and at the budget (at the curve's last M where a simulated curve stopped
  // early: see full_curve): median and 95th percentile over rows (or pairs).
  double err1_median = 0, err1_p95 = 0, err_budget_median = 0, err_budget_p95 = 0;
  // Smallest M with the predicted median / 95th-percentile error <= target; 0 if none up to the budget, and m_p95 is
  // 0 unless the decision is "M".
  arma::uword m_median = 0, m_p95 = 0;
  double at_m_median = 0, at_m_p95 = 0;  // the predicted error at m_p95 (or at the budget if it is 0)
  double at_m_p95_se = 0;                // its standard error (0 where exact)
  // Where the 95th-percentile curve - 2 SE and + 2 SE reach the target (0: not within the budget): the M the
  // simulation's own noise allows. Equal to m_p95 where the prediction is exact.
  arma::uword m_p95_low = 0, m_p95_high = 0;
  // What the row decides (kSettledWidth): "M": m_p95 is named, its interval [m_p95_low, m_p95_high] at most
  // kSettledWidth wide; "out of reach": simulated (or exact) at the budget, the 95th percentile - 2 SE is above the
  // target; "not settled": settling it would take more work than the row's share of --time-budget (or than
  // --max-draws), so no M is named (m_p95 = 0) and [m_p95_low, m_p95_high] is the interval reached (high 0: beyond the
  // budget).
  std::string decision = "M";
  std::size_t settle_draws = 0;     // simulated rows: the draws behind the grid points around the decision
  std::size_t draws_to_settle = 0;  // "not settled": about how many draws would settle it (0 otherwise)
  double work_seconds = 0;          // simulated rows: the simulation work spent, in seconds at kWorkPerSecond
  double settle_seconds = 0;        // "not settled": about how much simulation work would settle it, the same way
  // The control variate's variance reduction (plain variance / with it) of the rows' squared errors at the decision's
  // grid point: the median over the rows at or above the 90th percentile, which set the 95th (1 where none is used).
  double variance_reduction = 1;
  // Predicted error against M (the grid) with standard errors and the draws behind each point (0 where exact).
  std::vector<double> curve_m, curve_median, curve_p95, curve_median_se, curve_p95_se, curve_draws;
  arma::vec err1_each;  // the predicted error at M = 1 of each sampled row (attention) or pair (kernel, column-major)
  std::optional<FeatureRange> range;
  // --validate R: measured at m_p95 with R draws (rows with m_p95 = 0 are not validated); median / 95th percentile over
  // the same rows, and the standard error of the row at that quantile.
  std::size_t validate_reps = 0;
  arma::uword validate_m = 0;
  double measured_median = 0, measured_p95 = 0, measured_p95_se = 0;
  // Causal (simulated rows): each sampled row's error at the decision's grid point (the named M, else the curve's last
  // M), against the rows' positions (Advice::sampled_rows); and with --from-position, the decision over the rows from
  // that position, made from the same draws (decision "" when not asked).
  arma::vec err_at_m_each;
  arma::uvec positions;        // of the sampled rows (causal; empty otherwise)
  arma::uword position_m = 0;  // the grid M of err_at_m_each
  struct Band {                // the sampled rows at positions [lo, hi): their count and error at the decision's M
    arma::uword lo = 0, hi = 0, rows = 0;
    double median = 0, p95 = 0;
  };
  std::vector<Band> bands;
  struct From {
    std::string decision;
    arma::uword m_p95 = 0, m_p95_low = 0, m_p95_high = 0;
    double at_m_p95 = 0, at_m_p95_se = 0;
    std::vector<double> curve_p95, curve_p95_se;
  } from;
  // Learned rows (tasks/advise/learned.hpp): per curve point the training 95th percentile (mean over the fits; the
  // curve itself is held out) and the fit seconds; the fitted parameters (fit seed 0) at parameters_m, each named with
  // its shape and its values in row-major order.
  std::vector<double> curve_train_p95, curve_fit_seconds;
  struct Parameter {
    std::string name;
    std::vector<arma::uword> shape;
    std::vector<double> values;
  };
  std::vector<Parameter> parameters;
  arma::uword parameters_m = 0;
  std::vector<arma::uword> held_out_sequences;  // those fit seed 0 was judged on (0-based)
  double parameters_held_out_p95 = 0;           // fit seed 0's held-out p95 at parameters_m
  bool within_target(double target) const;      // measured p95 - 3 SE <= target (true when not validated)
};

inline constexpr arma::uword kExactTimedRows = 2048;

// Exact softmax attention against random features at the input's L (cost.cpp). Causal: Lq = Lk = L and exact attention
// over the L (L + 1) / 2 (query, key) pairs the mask keeps; random features form prefix sums at the cost of full sums.
struct AdviceCost {
  bool causal = false;
  double exact_flops = 0, exact_bytes = 0;
  double exact_state_bytes = 0;  // what exact attention keeps per head: the keys and values (a decoder's cache), fp32
  std::vector<arma::uword> m;    // the M of the rows that reach the target, ascending
  std::vector<double> rf_flops, rf_bytes, crossover_length;
  std::vector<double> rf_state_bytes;  // per M: the key sums S^T [V 1] and the projection (M x (dv + 1 + d)), fp32
  double exact_seconds = -1, rf_seconds = -1;  // measured on this machine (-1: not measured)
  // Query rows exact attention was timed on: all up to kExactTimedRows, else that many and the time scaled by
  // Lq / rows (its cost is exactly proportional to Lq: each row is one pass over the keys).
  arma::uword exact_timed_rows = 0;
  arma::uword timed_m = 0;
  std::string timed_estimator;
  std::string rf_not_timed;  // why rf_seconds is -1 although exact attention was timed (its features do not fit)
};

// --sums (sums.cpp): the key sums S = sum_j phi(k_j) [v_j, 1]^T of the recommended row at its M (without one: the first
// row whose sums can be formed, at the budget) held in number formats
// (analysis/rounded_sums.hpp), stabilised as random-feature attention computes them (tasks/attention.hpp: key features
// e^(log f - a), a the largest key log-feature, so every stored feature is <= 1), over the first l keys for l on a
// grid up to Lk; queries and the output ratio in double. Errors as metric rmse: the 95th percentile over the sampled
// rows of sqrt(E|.|^2) / RMS_i |Y_i(l)|, Y(l) exact attention over the first l keys, E over `draws` draws.
struct FormatSums {
  std::string name;
  // Per length (the first `valid` of them: beyond, the sums overflowed or a row's normaliser became 0): the error with
  // rounding (Y-hat in the format against Y) and of the rounding alone (against Y-hat of the same draw in double),
  // with the standard errors of the rows at the 95th percentile.
  std::vector<double> err_p95, err_p95_se, rounding_p95, rounding_p95_se;
  std::size_t valid = 0;
  arma::uword overflow_length = 0;         // keys after which a sum first overflowed in some draw (0: none)
  arma::uword zero_normaliser_length = 0;  // first grid length where a sampled row's normaliser is 0 (0: none)
  arma::uword dominated_from = 0;  // smallest grid length from which rounding_p95 > the error without rounding at
                                   // every larger length (overflow counts as dominated); 0: never
  double flushed = 0;              // share of the stored key features that the format holds as 0
};
struct SumsReport {
  std::string estimator, sampler;  // the recommended row (without one: the first row whose sums can be formed)
  std::string note;                // why nothing was emulated (then the rest is empty)
  arma::uword m = 0, chunk = 1;    // m: the row's M for the target (without a recommended row: the budget)
  std::string m_is;                // which of the two m is
  std::size_t draws = 0;
  std::uint64_t seed = 0;
  std::vector<arma::uword> lengths;
  std::vector<double> err_p95, err_p95_se;  // without rounding: the sums in double (advise's own simulation)
  std::vector<FormatSums> formats;
};

struct Advice {
  AdviseOptions options;
  arma::uword d = 0, Lq = 0, Lk = 0, dv = 0;
  std::string quantity_label;  // what the error is of (printed and stored)
  arma::uvec sampled_rows;     // query rows the quantiles are over
  std::vector<AdviceRow> rows;
  std::optional<std::size_t> best;  // index into rows
  AdviceCost cost;
  double offset_share = 0;  // |v|^2 / mean_i |Y_i|^2, v the mean row of V: near 1, |Y| is mostly V's offset
  // The choice at this input's L (recommend.cpp): "random features" or "learned features" (the best row, random or
  // learned, at its M costs fewer FLOPs than exact attention), "exact softmax" (it does not, or every row is out of
  // reach within the budget) or "not settled" (no M is named and some row's M is still open); choice_reason says which
  // case.
  std::string choice, choice_reason;
  std::string recommendation;      // plain words with the numbers
  std::optional<SumsReport> sums;  // --sums
};

// The feature counts the simulated predictions are made at: round(2^(k/4)) from 1 to the budget (the budget last),
// and the nested draws reaching each: `draws` up to M = 128, then draws * sqrt(128 / M), at least draws / 4 (and 2).
std::vector<arma::uword> prediction_grid(arma::uword budget);
std::vector<std::size_t> prediction_draws(const std::vector<arma::uword>& grid, std::size_t draws);

// Q: d x Lq queries, K: d x Lk keys (columns are tokens), V: Lk x dv values or empty. Throws InvalidArgument for
// mismatched shapes, non-finite or empty input and invalid options (naming the value). A family that cannot be fitted
// or evaluated is recorded with its reason and does not stop the others; when no row at all can be evaluated, it throws
// with every row's reason (InvalidArgument when each is not applicable to the chosen options, else NumericalError).
Advice advise(const arma::mat& Q, const arma::mat& K, const arma::mat& V, const AdviseOptions& opt,
              const std::function<void(const std::string&)>& progress = {});

// One head over several sequences (tasks/learned_attention.hpp): the random rows of advise() on the first sequence,
// and with opt.learned the learned rows, each map fitted on some of the sequences and judged on the others; the
// recommendation ranks them together. Throws InvalidArgument for learned maps with fewer than 2 sequences.
struct HeadSequences;
Advice advise_sequences(const HeadSequences& head, const AdviseOptions& opt,
                        const std::function<void(const std::string&)>& progress = {});

// V divided by the power of two nearest below its largest |entry| (exact in floating point; V when empty, zero or not
// finite). Every metric of advise is relative, so the report is the same, but values near the ends of the double
// range (|V| ~ 1e300 or 1e-300) then square without overflow or underflow. The callers of advise pass V through it.
arma::mat unit_scaled_values(const arma::mat& V);

// The report as JSON; `options` is its "options" block, as the front-end records them from its option table
// (frontend/advise_options.hpp record_advise).
nlohmann::json to_json(const Advice& a, const nlohmann::json& options);
// The schema of its reports (core/schema.hpp).
inline Output output_kind(const Advice&) { return Output::Advise; }

// The columns of an advice row (columns.cpp): the one table that the JSON report (--json, Python's dict, the HDF5
// report.json), each row's HDF5 datasets and attributes (axis "m": one value per curve point, "row": per sampled row or
// pair), and the command line's table are written from (io/record.hpp). A row's estimator, sampler, status, reason and
// note are written by each of them directly.
using AdviceColumn = Column<AdviceRow, AdviseOptions>;
const std::vector<AdviceColumn>& advice_columns();
// The cost's JSON (report.cpp), as the report's "cost" object.
using CostColumn = Column<AdviceCost, AdviseOptions>;
const std::vector<CostColumn>& cost_columns();

// The command line's report: the table of rows, the cost, the methods and the recommendation.
void write_table(std::ostream& out, const Advice& a);
// The HDF5 report (provenance is the caller's): /advise/report.json, the sampled rows, and per ok row the group
// /advise/<estimator>/<sampler> with its dataset and attribute columns.
class H5Writer;
void write_report(H5Writer& h5, const Advice& a, const nlohmann::json& options);

}  // namespace kestrel
